package inflight_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// The net/http middleware against the behaviour every adapter's shares.
func TestMiddlewareSuite(t *testing.T) {
	adaptertest.RunInFlight(t, adaptertest.InFlightHarness{Name: "inflight.Middleware", New: newSuiteApp})
}

func newSuiteApp(_ testing.TB, l *inflight.Limiter, rule inflight.Rule, s adaptertest.InFlightSetup) (adaptertest.App, error) {
	opts := []inflight.MiddlewareOption{inflight.WithFailClosedStatus(s.FailClosedStatus), inflight.WithNoIdentity(s.NoIdentity)}
	if s.Skip != "" {
		opts = append(opts, inflight.WithSkip(func(r *http.Request) bool { return r.URL.Path == s.Skip }))
	}
	if s.Denied != nil {
		opts = append(opts, inflight.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, res inflight.Result) {
			write(w, s.Denied(res, w.Header().Get(adapter.HeaderRetryAfter)))
		}))
	}
	if s.Error != nil {
		opts = append(opts, inflight.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, _ int, err error) {
			write(w, s.Error(err, w.Header().Get(adapter.HeaderRetryAfter)))
		}))
	}
	mw, err := adaptertest.MakeInFlight(s, inflight.Middleware, inflight.MustMiddleware, l, rule, opts)
	if err != nil {
		return nil, err
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Handler != nil {
			s.Handler(r.Header.Get(adaptertest.ClientHeader))
		}
		io.WriteString(w, "ok")
	})
	mux := http.NewServeMux()
	mux.Handle("GET /", mw(ok))
	mux.Handle("GET /healthz", mw(ok))
	return adaptertest.HTTPApp(mux), nil
}

func write(w http.ResponseWriter, a adaptertest.Answer) {
	w.WriteHeader(a.Status)
	io.WriteString(w, a.Body)
}

// A nil option, and options given a nil function, are refused with an
// error that names Middleware and the option.
func TestMiddlewareNilOptions(t *testing.T) {
	adaptertest.InFlightRejectsOptions(t, "inflight.Middleware", inflight.Middleware, inflight.MustMiddleware, map[string]inflight.MiddlewareOption{
		adaptertest.NilOption: nil,
		"WithSkip":            inflight.WithSkip(nil),
		"WithDeniedHandler":   inflight.WithDeniedHandler(nil),
		"WithErrorHandler":    inflight.WithErrorHandler(nil),
	})
}
