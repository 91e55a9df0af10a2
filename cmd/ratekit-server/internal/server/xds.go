package server

import (
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/xds"
)

// subscribe starts the xDS client of CONFIG_TYPE=GRPC_XDS_SOTW, whose
// responses are loaded as files and passed to use. Unless
// FORCE_START_WITHOUT_INITIAL_CONFIG, it waits for the first response,
// as envoy's service does.
func (s *Server) subscribe(opts config.Options, use func(*config.Config, []config.Warning, error)) error {
	var err error
	s.xds, err = xds.Start(s.set.XDS, func(files []config.File, version string) error {
		c, warns, err := config.Load(files, opts)
		if err == nil {
			s.xdsVersion.Store(&version)
		}
		use(c, warns, err)
		return err
	}, s.log)
	if err != nil {
		return err
	}
	if !s.set.ForceStart {
		s.log.Info("waiting for the first configuration from the xDS server", "server", s.set.XDS.ServerURL)
		<-s.loaded
	}
	return nil
}
