package echo5limit_test

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/echotest"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/echo5limit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func ok(c *echo.Context) error {
	status, asError := adaptertest.AnswerStatus(c.Request().Header.Get)
	if asError {
		return echo.NewHTTPError(status, "ok")
	}
	adaptertest.PanicIf(c.Request().Header.Get, "before")
	if adaptertest.StreamAnswer(c.Request().Context(), c.Request().Header.Get, func(line string) error {
		_, err := c.Response().Write([]byte(line))
		if err == nil {
			err = http.NewResponseController(c.Response()).Flush()
		}
		return err
	}, func(n int) { echo5limit.AddCost(c, n) }) {
		return nil
	}
	err := c.String(status, "ok")
	echo5limit.AddCost(c, adaptertest.AnswerCost(c.Request().Header.Get))
	adaptertest.PanicIf(c.Request().Header.Get, "after")
	return err
}

// newEcho returns an Echo that serves ok on GET / and /healthz behind mws.
func newEcho(mws ...echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.Use(mws...)
	e.GET("/", ok)
	e.GET("/healthz", ok)
	return e
}

// harness builds Echo v5 apps for the shared suite: the per-route
// middleware on a group, the login one on its route.
var harness = adaptertest.Harness{
	Name: "echo5limit.New",
	New: func(_ testing.TB, l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (adaptertest.App, error) {
		opts := options(s)
		if s.Must {
			return adaptertest.HTTPApp(newEcho(echo5limit.MustNew(l, rules, opts...))), nil
		}
		mw, err := echo5limit.New(l, rules, opts...)
		if err != nil {
			return nil, err
		}
		return adaptertest.HTTPApp(newEcho(mw)), nil
	},
	Routes: func(_ testing.TB, l *core.Limiter, global, users, login []core.Rule) adaptertest.App {
		e := echo.New()
		e.Use(echo5limit.MustNew(l, global))
		e.Group("/users", echo5limit.MustNew(l, users)).GET("/:id", ok)
		e.POST("/login", ok, echo5limit.MustNew(l, login))
		e.GET("/", ok)
		return adaptertest.HTTPApp(e)
	},
	Pattern: "/users/:id",
}

// options returns the options that s describes; its hooks write what s's
// hooks answer, as plain text.
func options(s adaptertest.Setup) []echo5limit.Option {
	opts := adaptertest.Shared(s.Config, echo5limit.WithHeaders, echo5limit.WithIETFDraft, echo5limit.WithFailClosedStatus, echo5limit.WithNoIdentity)
	opts = append(opts, adaptertest.Quota(s.Config, echo5limit.WithRuleSet, echo5limit.WithCountOnly)...)
	opts = append(opts, adaptertest.Charged(s.Config, echo5limit.WithCharged)...)
	retryAfter := func(c *echo.Context) string { return c.Response().Header().Get("Retry-After") }
	if path := s.Skip; path != "" {
		opts = append(opts, echo5limit.WithSkipper(func(c *echo.Context) bool { return c.Path() == path }))
	}
	if answer := s.Denied; answer != nil {
		opts = append(opts, echo5limit.WithDeniedHandler(func(c *echo.Context, d core.Decision) error {
			a := answer(d, retryAfter(c))
			return c.String(a.Status, a.Body)
		}))
	}
	if answer := s.Error; answer != nil {
		opts = append(opts, echo5limit.WithErrorHandler(func(c *echo.Context, status int, err error) error {
			a := answer(status, err, retryAfter(c))
			return c.String(a.Status, a.Body)
		}))
	}
	return opts
}

func TestSuite(t *testing.T) { adaptertest.Run(t, harness) }

// The middleware called directly on a context made with Echo's echotest
// package, as handler tests do.
func TestEchotestContext(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	h := echo5limit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)})(ok)
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		w := echotest.ContextConfig{Request: adaptertest.NewRequest("GET", "/", "a")}.ServeWithHandler(t, h)
		if w.Code != want {
			t.Errorf("request %d: status %d, want %d", i+1, w.Code, want)
		}
	}
}

// Errors that the denied and error handlers return go to Echo's
// HTTPErrorHandler, and the chain stops there.
func TestHandlerErrors(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	reached := 0
	count := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error { reached++; return next(c) }
	}
	mw := echo5limit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		echo5limit.WithNoIdentity(adapter.NoIdentity401),
		echo5limit.WithDeniedHandler(func(*echo.Context, core.Decision) error {
			return echo.NewHTTPError(http.StatusTeapot, "slow down")
		}),
		echo5limit.WithErrorHandler(func(*echo.Context, int, error) error { return echo.ErrForbidden }),
	)
	app := adaptertest.HTTPApp(newEcho(mw, count))
	app.Get("/", "a")
	r := app.Get("/", "a")
	if got, want := fmt.Sprint(r.Status, " ", r.Body, " ", r.Header.Get("Retry-After")), "418 {\"message\":\"slow down\"}\n 30"; got != want {
		t.Errorf("denied: %q, want %q (from Echo's error handler, with Retry-After)", got, want)
	}
	if got, want := app.Get("/", "").Status, http.StatusForbidden; got != want {
		t.Errorf("no identity: status %d, want %d (from Echo's error handler)", got, want)
	}
	if reached != 1 {
		t.Errorf("the chain went on after %d requests, want 1", reached)
	}
}

// Key and cost functions over the *echo.Context read what an earlier
// middleware put there, and fail outside Echo.
func TestNativeKeyAndCost(t *testing.T) {
	tenant := echo5limit.Key(func(c *echo.Context) (string, error) {
		if id, _ := c.Get("tenant").(string); id != "" {
			return "tenant:" + id, nil
		}
		return "", core.ErrNoIdentity
	})
	cost := echo5limit.Cost(func(c *echo.Context) int { n, _ := c.Get("cost").(int); return n })
	rule := core.Rule{Name: "tenant", Limit: core.Limit{Rate: 10, Period: time.Minute, Algorithm: core.FixedWindow}, Key: tenant, Cost: cost}
	l, _ := adaptertest.NewLimiter(t)
	app := adaptertest.HTTPApp(newEcho(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c *echo.Context) error {
			c.Set("tenant", c.Request().Header.Get(adaptertest.ClientHeader))
			c.Set("cost", 3)
			return next(c)
		}
	}, echo5limit.MustNew(l, []core.Rule{rule})))
	var remaining []string
	for range 4 {
		r := app.Get("/", "acme")
		remaining = append(remaining, fmt.Sprint(r.Status, ":", r.Header.Get("X-RateLimit-Remaining")))
	}
	if got, want := fmt.Sprint(remaining), "[200:7 200:4 200:1 429:1]"; got != want {
		t.Errorf("status:remaining %s, want %s", got, want)
	}
	outside := adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil))
	if _, err := tenant(outside); err == nil || errors.Is(err, core.ErrNoIdentity) {
		t.Errorf("native key outside Echo: %v, want an error not wrapping ErrNoIdentity", err)
	}
	if got := cost(outside); got != 0 {
		t.Errorf("native cost outside Echo: %d, want 0", got)
	}
}

// The core.Request view: the route pattern, and the socket peer as
// RemoteAddr, never the forwarded address that c.RealIP() believes
// through the app's IPExtractor.
func TestRequestView(t *testing.T) {
	var seen map[string]string
	rule := core.Rule{Name: "view", Limit: core.PerMinute(10), Key: func(r core.Request) (string, error) {
		seen = map[string]string{
			"Method": r.Method(), "Path": r.Path(), "Route": r.Route(), "Query": r.Query("q"),
			"Header": r.Header("X-A"), "HeaderValues": strings.Join(r.HeaderValues("X-B"), ","),
			"RemoteAddr": r.RemoteAddr(),
		}
		return "static:view", nil
	}}
	l, _ := adaptertest.NewLimiter(t)
	e := echo.New()
	_, peer, _ := net.ParseCIDR("192.0.2.1/32") // httptest's peer, a proxy Echo trusts
	e.IPExtractor = echo.ExtractIPFromXFFHeader(echo.TrustIPRange(peer))
	realIP := ""
	e.GET("/items/:id", func(c *echo.Context) error { realIP = c.RealIP(); return ok(c) }, echo5limit.MustNew(l, []core.Rule{rule}))
	r := httptest.NewRequest("GET", "/items/7?q=x", nil)
	r.Header.Set("X-A", "a")
	r.Header["X-B"] = []string{"1", "2"}
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	if resp := adaptertest.HTTPApp(e)(r); resp.Status != http.StatusOK || realIP != "203.0.113.9" {
		t.Fatalf("status %d, c.RealIP() %q: want 200 and the forwarded address", resp.Status, realIP)
	}
	want := map[string]string{
		"Method": "GET", "Path": "/items/7", "Route": "/items/:id", "Query": "x",
		"Header": "a", "HeaderValues": "1,2",
		"RemoteAddr": "192.0.2.1:1234",
	}
	if !maps.Equal(seen, want) {
		t.Errorf("view %v, want %v", seen, want)
	}
}

// A nil option, and options given a nil function, are rejected.
func TestNilOptions(t *testing.T) {
	adaptertest.RejectsOptions(t, "echo5limit.New", echo5limit.New, echo5limit.MustNew, map[string]echo5limit.Option{
		adaptertest.NilOption: nil,
		"WithSkipper":         echo5limit.WithSkipper(nil),
		"WithDeniedHandler":   echo5limit.WithDeniedHandler(nil),
		"WithErrorHandler":    echo5limit.WithErrorHandler(nil),
	})
}
