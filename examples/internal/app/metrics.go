package app

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ratekit/ratekit/promlimit"
)

// MetricsPath is where an app run with -metrics serves its Prometheus
// metrics, on its own address, never limited.
const MetricsPath = "/metrics"

// UnlimitedRoute is Unlimited for routers that report the route a request
// matched: it judges route, or urlPath when no route matched (route ""), so
// that /metrics is never limited, served or not.
func UnlimitedRoute(route, urlPath string) bool {
	if route == "" {
		route = urlPath
	}
	return Unlimited(route)
}

// newMetrics returns a Collector for the app's Limiter, and the /metrics
// handler that serves it, with the Go runtime's and the process's metrics,
// from a registry of its own.
func newMetrics() (*promlimit.Collector, http.Handler, error) {
	collector, err := promlimit.New()
	if err != nil {
		return nil, nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collector); err != nil {
		return nil, nil, err
	}
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, err
	}
	return collector, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}
