package server

import (
	"fmt"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/tlsreload"
)

// grpcTLS returns the gRPC port's credentials under GRPC_SERVER_USE_TLS,
// nil without: the certificate files are read again when they change,
// and with GRPC_CLIENT_TLS_CACERT client certificates are required and
// checked (against that file only, and GRPC_CLIENT_TLS_SAN when set).
func grpcTLS(set settings.Settings, log *slog.Logger) (grpc.ServerOption, error) {
	if !set.GRPCServerTLS {
		return nil, nil
	}
	conf, err := tlsreload.Server(tlsreload.Files{
		Cert: set.GRPCServerTLSCert, Key: set.GRPCServerTLSKey,
		CA: set.GRPCClientTLSCACert, SAN: set.GRPCClientTLSSAN,
	}, log)
	if err != nil {
		return nil, fmt.Errorf("GRPC_SERVER_USE_TLS: %w", err)
	}
	return grpc.Creds(credentials.NewTLS(conf)), nil
}
