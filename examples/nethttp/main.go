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

func newServer(limiter *core.Limiter, rules app.Rules, extra app.Extra) (app.Server, error) {
	// The default rule on every route but /healthz, /metrics and /admin/.
	perClient, err := nethttp.New(limiter, nil, nethttp.WithRuleSet(rules.Default),
		nethttp.WithSkip(func(r *http.Request) bool { return app.Unlimited(r.URL.Path) }))
	if err != nil {
		return nil, err
	}
	// The strict rule on /strict only: it wraps that route's handler.
	strict, err := nethttp.New(limiter, nil, nethttp.WithRuleSet(rules.Strict))
	if err != nil {
		return nil, err
	}
	// The login rule on POST /login only, counting only its 401 answers.
	login, err := nethttp.New(limiter, rules.Login, nethttp.WithCountOnly(app.LoginRule, app.CountsAsFailure))
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
	mux.Handle("POST "+app.LoginPath, login(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(rules.LoginStatus(r.Header.Get(app.PasswordHeader)))
	})))
	mux.HandleFunc("GET "+app.HealthzPath, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.Handle(app.PagePath, extra.Page) // the live page, never limited
	if extra.Metrics != nil {            // -metrics
		mux.Handle("GET "+app.MetricsPath, extra.Metrics)
	}
	if extra.Admin != nil { // ADMIN_TOKEN
		mux.Handle("GET "+app.AdminQuotaPath, extra.Admin)
		mux.Handle("POST "+app.AdminResetPath, extra.Admin)
	}
	return app.HTTPServer(perClient(mux)), nil
}
