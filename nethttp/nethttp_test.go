package nethttp_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/nethttp"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	status, _ := adaptertest.AnswerStatus(r.Header.Get)
	adaptertest.PanicIf(r.Header.Get, "before")
	if adaptertest.StreamAnswer(r.Context(), r.Header.Get, func(line string) error {
		_, err := io.WriteString(w, line)
		if err == nil {
			err = http.NewResponseController(w).Flush()
		}
		return err
	}, func(n int) { nethttp.AddCost(r, n) }) {
		return
	}
	w.WriteHeader(status)
	io.WriteString(w, "ok")
	nethttp.AddCost(r, adaptertest.AnswerCost(r.Header.Get))
	adaptertest.PanicIf(r.Header.Get, "after")
})

// harness builds net/http apps for the shared suite: a ServeMux, with the
// per-route middlewares wrapping their routes' handlers inside it.
var harness = adaptertest.Harness{
	Name: "nethttp.New",
	New: func(tb testing.TB, l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (adaptertest.App, error) {
		mw, err := newMiddleware(l, rules, s)
		if _, werr := nethttp.Wrap(ok, l, rules, options(s)...); (werr == nil) != (err == nil) {
			tb.Errorf("Wrap: %v; New: %v; want both to fail or neither", werr, err)
		}
		if err != nil {
			return nil, err
		}
		return adaptertest.HTTPApp(mw(ok)), nil
	},
	Routes: func(_ testing.TB, l *core.Limiter, global, users, login []core.Rule) adaptertest.App {
		mux := http.NewServeMux()
		mux.Handle("GET /users/{id}", nethttp.MustNew(l, users)(ok))
		mux.Handle("POST /login", nethttp.MustNew(l, login)(ok))
		mux.Handle("GET /", ok)
		return adaptertest.HTTPApp(nethttp.MustNew(l, global)(mux))
	},
	Pattern: "GET /users/{id}",
}

func newMiddleware(l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (func(http.Handler) http.Handler, error) {
	if s.Must {
		return nethttp.MustNew(l, rules, options(s)...), nil
	}
	return nethttp.New(l, rules, options(s)...)
}

// options returns the options that s describes; its hooks write what s's
// hooks answer.
func options(s adaptertest.Setup) []nethttp.Option {
	opts := adaptertest.Shared(s.Config, nethttp.WithHeaders, nethttp.WithIETFDraft, nethttp.WithFailClosedStatus, nethttp.WithNoIdentity)
	opts = append(opts, adaptertest.Quota(s.Config, nethttp.WithRuleSet, nethttp.WithCountOnly)...)
	opts = append(opts, adaptertest.Charged(s.Config, nethttp.WithCharged)...)
	if s.Skip != "" {
		opts = append(opts, nethttp.WithSkip(func(r *http.Request) bool { return r.URL.Path == s.Skip }))
	}
	if s.Denied != nil {
		opts = append(opts, nethttp.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, d core.Decision) {
			write(w, s.Denied(d, w.Header().Get("Retry-After")))
		}))
	}
	if s.Error != nil {
		opts = append(opts, nethttp.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, status int, err error) {
			write(w, s.Error(status, err, w.Header().Get("Retry-After")))
		}))
	}
	return opts
}

func write(w http.ResponseWriter, a adaptertest.Answer) {
	w.WriteHeader(a.Status)
	io.WriteString(w, a.Body)
}

func TestSuite(t *testing.T) { adaptertest.Run(t, harness) }

// WithRoute reports the pattern of routers that do not set r.Pattern.
func TestWithRoute(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := core.Rule{Name: "route", Limit: core.PerMinute(1), Key: keyfuncs.Route()}
	app := adaptertest.HTTPApp(nethttp.MustNew(l, []core.Rule{rule}, nethttp.WithRoute(func(*http.Request) string { return "/items/:id" }))(ok))
	if got, want := app.Get("/items/1", "").Status, http.StatusOK; got != want {
		t.Fatalf("first request: status %d, want %d", got, want)
	}
	if got, want := app.Get("/items/2", "").Status, http.StatusTooManyRequests; got != want {
		t.Errorf("second request, same route: status %d, want %d", got, want)
	}
}

func TestWrap(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	h, err := nethttp.Wrap(ok, l, []core.Rule{adaptertest.FixedRule("default", 1)}, nethttp.WithHeaders(adapter.HeadersLegacy))
	if err != nil {
		t.Fatal(err)
	}
	app := adaptertest.HTTPApp(h)
	if r := app.Get("/", "a"); r.Status != http.StatusOK || r.Body != "ok" || r.Header.Get("RateLimit") != "" {
		t.Errorf("first request: %d %q, headers %v; want 200 \"ok\", legacy fields only", r.Status, r.Body, r.Header)
	}
	if got, want := app.Get("/", "a").Status, http.StatusTooManyRequests; got != want {
		t.Errorf("second request: status %d, want %d", got, want)
	}
	if _, err := nethttp.Wrap(ok, nil, []core.Rule{adaptertest.FixedRule("default", 1)}); err == nil {
		t.Error("Wrap with a nil Limiter succeeded, want an error")
	}
}

// A nil option, and options given a nil function, are rejected, by Wrap
// too.
func TestNilOptions(t *testing.T) {
	opts := map[string]nethttp.Option{
		adaptertest.NilOption: nil,
		"WithSkip":            nethttp.WithSkip(nil),
		"WithRoute":           nethttp.WithRoute(nil),
		"WithDeniedHandler":   nethttp.WithDeniedHandler(nil),
		"WithErrorHandler":    nethttp.WithErrorHandler(nil),
	}
	adaptertest.RejectsOptions(t, "nethttp.New", nethttp.New, nethttp.MustNew, opts)
	l, _ := adaptertest.NewLimiter(t)
	for name, opt := range opts {
		if _, err := nethttp.Wrap(ok, l, []core.Rule{adaptertest.FixedRule("default", 1)}, opt); err == nil || !strings.HasPrefix(err.Error(), "nethttp.Wrap: ") {
			t.Errorf("Wrap with %s: %v, want an error that names nethttp.Wrap", name, err)
		}
	}
}
