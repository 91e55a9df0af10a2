package echolimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func ok(c echo.Context) error {
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
	}, func(n int) { echolimit.AddCost(c, n) }) {
		return nil
	}
	err := c.String(status, "ok")
	echolimit.AddCost(c, adaptertest.AnswerCost(c.Request().Header.Get))
	adaptertest.PanicIf(c.Request().Header.Get, "after")
	return err
}

// app returns an Echo that serves ok on GET / and /healthz behind mws.
func app(mws ...echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.Use(mws...)
	e.GET("/", ok)
	e.GET("/healthz", ok)
	return e
}

// harness builds Echo apps for the shared suite: the per-route middleware
// on a group, the login one on its route.
var harness = adaptertest.Harness{
	Name: "echolimit.New",
	New: func(_ testing.TB, l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (adaptertest.App, error) {
		mw, err := newMiddleware(l, rules, s)
		if err != nil {
			return nil, err
		}
		return adaptertest.HTTPApp(app(mw)), nil
	},
	Routes: func(_ testing.TB, l *core.Limiter, global, users, login []core.Rule) adaptertest.App {
		e := echo.New()
		e.Use(echolimit.MustNew(l, global))
		e.Group("/users", echolimit.MustNew(l, users)).GET("/:id", ok)
		e.POST("/login", ok, echolimit.MustNew(l, login))
		e.GET("/", ok)
		return adaptertest.HTTPApp(e)
	},
	Pattern: "/users/:id",
}

func newMiddleware(l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (echo.MiddlewareFunc, error) {
	if s.Must {
		return echolimit.MustNew(l, rules, options(s)...), nil
	}
	return echolimit.New(l, rules, options(s)...)
}

// options returns the options that s describes; its hooks write what s's
// hooks answer.
func options(s adaptertest.Setup) []echolimit.Option {
	opts := adaptertest.Shared(s.Config, echolimit.WithHeaders, echolimit.WithIETFDraft, echolimit.WithFailClosedStatus, echolimit.WithNoIdentity)
	opts = append(opts, adaptertest.Quota(s.Config, echolimit.WithRuleSet, echolimit.WithCountOnly)...)
	opts = append(opts, adaptertest.Charged(s.Config, echolimit.WithCharged)...)
	if s.Skip != "" {
		opts = append(opts, echolimit.WithSkipper(func(c echo.Context) bool { return c.Path() == s.Skip }))
	}
	if s.Denied != nil {
		opts = append(opts, echolimit.WithDeniedHandler(func(c echo.Context, d core.Decision) error {
			a := s.Denied(d, c.Response().Header().Get("Retry-After"))
			return c.String(a.Status, a.Body)
		}))
	}
	if s.Error != nil {
		opts = append(opts, echolimit.WithErrorHandler(func(c echo.Context, status int, err error) error {
			a := s.Error(status, err, c.Response().Header().Get("Retry-After"))
			return c.String(a.Status, a.Body)
		}))
	}
	return opts
}

func TestSuite(t *testing.T) { adaptertest.Run(t, harness) }

// The middleware called directly on a context made with Echo's test
// helper, as handler tests do.
func TestNewContext(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	mw := echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)})
	e := echo.New()
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		w := httptest.NewRecorder()
		c := e.NewContext(adaptertest.NewRequest("GET", "/", "a"), w)
		if err := mw(ok)(c); err != nil {
			t.Fatal(err)
		}
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
	a := adaptertest.HTTPApp(app(echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		echolimit.WithNoIdentity(adapter.NoIdentity401),
		echolimit.WithDeniedHandler(func(echo.Context, core.Decision) error {
			return echo.NewHTTPError(http.StatusTeapot, "slow down")
		}),
		echolimit.WithErrorHandler(func(echo.Context, int, error) error {
			return echo.NewHTTPError(http.StatusForbidden, "who are you?")
		}),
	), func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { reached++; return next(c) }
	}))
	a.Get("/", "a")
	r := a.Get("/", "a")
	if got, want := fmt.Sprint(r.Status, " ", r.Body), "418 {\"message\":\"slow down\"}\n"; got != want {
		t.Errorf("denied: %q, want %q (from Echo's error handler)", got, want)
	}
	if got, want := r.Header.Get("Retry-After"), "30"; got != want {
		t.Errorf("denied: Retry-After %q, want %q", got, want)
	}
	if got, want := a.Get("/", "").Status, http.StatusForbidden; got != want {
		t.Errorf("no identity: status %d, want %d (from Echo's error handler)", got, want)
	}
	if reached != 1 {
		t.Errorf("the chain went on after %d requests, want 1", reached)
	}
}

// Key and cost functions over the echo.Context read what an earlier
// middleware put there, and fail outside Echo.
func TestNativeKeyAndCost(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := core.Rule{
		Name:  "tenant",
		Limit: core.Limit{Rate: 10, Period: time.Minute, Algorithm: core.FixedWindow},
		Key: echolimit.Key(func(c echo.Context) (string, error) {
			if id, _ := c.Get("tenant").(string); id != "" {
				return "tenant:" + id, nil
			}
			return "", core.ErrNoIdentity
		}),
		Cost: echolimit.Cost(func(c echo.Context) int { n, _ := c.Get("cost").(int); return n }),
	}
	a := adaptertest.HTTPApp(app(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set("tenant", c.Request().Header.Get(adaptertest.ClientHeader))
			c.Set("cost", 3)
			return next(c)
		}
	}, echolimit.MustNew(l, []core.Rule{rule})))
	for _, want := range []string{"7", "4"} {
		if got := a.Get("/", "acme").Header.Get("X-RateLimit-Remaining"); got != want {
			t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
		}
	}
	outside := adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil))
	if _, err := rule.Key(outside); err == nil || errors.Is(err, core.ErrNoIdentity) {
		t.Errorf("native key outside Echo: %v, want an error not wrapping ErrNoIdentity", err)
	}
	if got := rule.Cost(outside); got != 0 {
		t.Errorf("native cost outside Echo: %d, want 0", got)
	}
}

// A nil option, and options given a nil function, are rejected.
func TestNilOptions(t *testing.T) {
	adaptertest.RejectsOptions(t, "echolimit.New", echolimit.New, echolimit.MustNew, map[string]echolimit.Option{
		adaptertest.NilOption: nil,
		"WithSkipper":         echolimit.WithSkipper(nil),
		"WithDeniedHandler":   echolimit.WithDeniedHandler(nil),
		"WithErrorHandler":    echolimit.WithErrorHandler(nil),
	})
}
