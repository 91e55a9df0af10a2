package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/stats"
)

// promCollector returns the collector of envoy's statistics: through
// PROMETHEUS_MAPPER_YAML's mappings when set, as envoy's Prometheus sink
// applies them, else under envoy's default mapping. A mapping file that
// does not load is logged and the default mapping used (envoy's service
// then maps nothing, and exports every statistic under its escaped statsd
// name).
func (s *Server) promCollector() prometheus.Collector {
	if s.set.PrometheusMapperYAML == "" {
		return s.stats.Collector()
	}
	m, err := stats.LoadMapper(s.set.PrometheusMapperYAML)
	if err != nil {
		s.log.Error("statistics under envoy's default mapping", "error", err.Error())
		return s.stats.Collector()
	}
	return s.stats.MappedCollector(m)
}
