// Command nethttp is the ratekit example app for net/http.
//
//	go run ./examples/nethttp                          # embedded miniredis
//	go run ./examples/nethttp -redis localhost:6379    # a Redis server
//
// GET / is limited by the default rule (-limit per -period and client),
// GET /strict also by the strict rule (-strict-limit), and GET /healthz is
// never limited, nor is GET /metrics, served with -metrics (METRICS=1).
// Run it with -h for every flag and its environment variable.
package main

import (
	"io"
	"net/http"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/nethttp"
)

func main() { app.Main("nethttp", newServer) }

func newServer(limiter *core.Limiter, rules app.Rules, metrics http.Handler) (app.Server, error) {
	// The default rule on every route but /healthz and /metrics.
	perClient, err := nethttp.New(limiter, rules.Default,
		nethttp.WithSkip(func(r *http.Request) bool { return app.Unlimited(r.URL.Path) }))
	if err != nil {
		return nil, err
	}
	// The strict rule on /strict only: it wraps that route's handler.
	strict, err := nethttp.New(limiter, rules.Strict)
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from net/http\n")
	})
	mux.Handle("GET "+app.StrictPath, strict(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from net/http, strictly\n")
	})))
	mux.HandleFunc("GET "+app.HealthzPath, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	if metrics != nil { // -metrics
		mux.Handle("GET "+app.MetricsPath, metrics)
	}
	return app.HTTPServer(perClient(mux)), nil
}
