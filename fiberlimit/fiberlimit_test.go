package fiberlimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	recoverer "github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func ok(c *fiber.Ctx) error {
	status, asError := adaptertest.AnswerStatus(func(name string) string { return c.Get(name) })
	if asError {
		return fiber.NewError(status, "ok")
	}
	adaptertest.PanicIf(func(name string) string { return c.Get(name) }, "before")
	if adaptertest.StreamAnswer(c.UserContext(), func(name string) string { return c.Get(name) }, func(line string) error {
		_, err := c.WriteString(line)
		return err
	}, func(n int) { fiberlimit.AddCost(c, n) }) {
		return nil
	}
	err := c.Status(status).SendString("ok")
	fiberlimit.AddCost(c, adaptertest.AnswerCost(func(name string) string { return c.Get(name) }))
	adaptertest.PanicIf(func(name string) string { return c.Get(name) }, "after")
	return err
}

// newApp returns an app that serves ok on GET / and /healthz behind mws,
// and Fiber's recover middleware before them, which makes a panic an error
// that Fiber answers 500, as an application would.
func newApp(mws ...fiber.Handler) *fiber.App {
	app := fiber.New()
	app.Use(recoverer.New())
	for _, mw := range mws {
		app.Use(mw)
	}
	app.Get("/", ok)
	app.Get("/healthz", ok)
	return app
}

// userContext hands the context of the request being served over to
// Fiber, whose app.Test drops it: its handler makes it the user context,
// as an application's middleware would.
type userContext struct {
	mu  sync.Mutex
	ctx context.Context
}

func (u *userContext) handler(c *fiber.Ctx) error {
	u.mu.Lock()
	c.SetUserContext(u.ctx)
	u.mu.Unlock()
	return c.Next()
}

// serve returns the App of app, whose handlers find each request's
// context through u (if not nil).
func serve(tb testing.TB, app *fiber.App, u *userContext) adaptertest.App {
	return func(r *http.Request) adaptertest.Response {
		if u != nil {
			u.mu.Lock()
			u.ctx = r.Context()
			u.mu.Unlock()
		}
		resp, err := app.Test(r, -1)
		if err != nil {
			tb.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			tb.Fatal(err)
		}
		return adaptertest.Response{Status: resp.StatusCode, Header: resp.Header, Body: string(body)}
	}
}

// harness builds Fiber apps for the shared suite. In Fiber a middleware
// added with Use or on a group reads its own prefix as the route pattern,
// so the per-route middleware sits on its route; the login one is on a
// group.
var harness = adaptertest.Harness{
	Name: "fiberlimit.New",
	New: func(tb testing.TB, l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (adaptertest.App, error) {
		mw, err := newMiddleware(l, rules, s)
		if err != nil {
			return nil, err
		}
		u := new(userContext)
		return serve(tb, newApp(u.handler, mw), u), nil
	},
	Routes: func(tb testing.TB, l *core.Limiter, global, users, login []core.Rule) adaptertest.App {
		app := fiber.New()
		app.Use(fiberlimit.MustNew(l, global))
		app.Get("/users/:id", fiberlimit.MustNew(l, users), ok)
		app.Group("/login", fiberlimit.MustNew(l, login)).Post("/", ok)
		app.Get("/", ok)
		return serve(tb, app, nil)
	},
	Pattern: "/users/:id",
}

func newMiddleware(l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (fiber.Handler, error) {
	if s.Must {
		return fiberlimit.MustNew(l, rules, options(s)...), nil
	}
	return fiberlimit.New(l, rules, options(s)...)
}

// options returns the options that s describes; its hooks write what s's
// hooks answer.
func options(s adaptertest.Setup) []fiberlimit.Option {
	opts := adaptertest.Shared(s.Config, fiberlimit.WithHeaders, fiberlimit.WithIETFDraft, fiberlimit.WithFailClosedStatus, fiberlimit.WithNoIdentity)
	opts = append(opts, adaptertest.Quota(s.Config, fiberlimit.WithRuleSet, fiberlimit.WithCountOnly)...)
	opts = append(opts, adaptertest.Charged(s.Config, fiberlimit.WithCharged)...)
	if s.Skip != "" {
		opts = append(opts, fiberlimit.WithNext(func(c *fiber.Ctx) bool { return c.Path() == s.Skip }))
	}
	if s.Denied != nil {
		opts = append(opts, fiberlimit.WithDeniedHandler(func(c *fiber.Ctx, d core.Decision) error {
			a := s.Denied(d, c.GetRespHeader("Retry-After"))
			return c.Status(a.Status).SendString(a.Body)
		}))
	}
	if s.Error != nil {
		opts = append(opts, fiberlimit.WithErrorHandler(func(c *fiber.Ctx, status int, err error) error {
			a := s.Error(status, err, c.GetRespHeader("Retry-After"))
			return c.Status(a.Status).SendString(a.Body)
		}))
	}
	return opts
}

func TestSuite(t *testing.T) { adaptertest.Run(t, harness) }

// Errors that the denied and error handlers return go to the app's
// ErrorHandler, and the chain stops there.
func TestHandlerErrors(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	reached := 0
	app := serve(t, newApp(fiberlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		fiberlimit.WithNoIdentity(adapter.NoIdentity401),
		fiberlimit.WithDeniedHandler(func(*fiber.Ctx, core.Decision) error { return fiber.ErrTooManyRequests }),
		fiberlimit.WithErrorHandler(func(*fiber.Ctx, int, error) error {
			return fiber.NewError(http.StatusForbidden, "who are you?")
		}),
	), func(c *fiber.Ctx) error { reached++; return c.Next() }), nil)
	app.Get("/", "a")
	r := app.Get("/", "a")
	if got, want := fmt.Sprint(r.Status, " ", r.Body), "429 Too Many Requests"; got != want {
		t.Errorf("denied: %q, want %q (from Fiber's error handler)", got, want)
	}
	if got, want := r.Header.Get("Retry-After"), "30"; got != want {
		t.Errorf("denied: Retry-After %q, want %q", got, want)
	}
	if r := app.Get("/", ""); r.Status != http.StatusForbidden || r.Body != "who are you?" {
		t.Errorf("no identity: %d %q, want 403 from Fiber's error handler", r.Status, r.Body)
	}
	if reached != 1 {
		t.Errorf("the chain went on after %d requests, want 1", reached)
	}
}

// Key and cost functions over the *fiber.Ctx read what an earlier handler
// put there, and fail outside Fiber.
func TestNativeKeyAndCost(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := core.Rule{
		Name:  "tenant",
		Limit: core.Limit{Rate: 10, Period: time.Minute, Algorithm: core.FixedWindow},
		Key: fiberlimit.Key(func(c *fiber.Ctx) (string, error) {
			if id, _ := c.Locals("tenant").(string); id != "" {
				return "tenant:" + id, nil
			}
			return "", core.ErrNoIdentity
		}),
		Cost: fiberlimit.Cost(func(c *fiber.Ctx) int { n, _ := c.Locals("cost").(int); return n }),
	}
	app := serve(t, newApp(func(c *fiber.Ctx) error {
		c.Locals("tenant", strings.Clone(c.Get(adaptertest.ClientHeader)))
		c.Locals("cost", 3)
		return c.Next()
	}, fiberlimit.MustNew(l, []core.Rule{rule})), nil)
	for _, want := range []string{"7", "4", "1"} {
		if got := app.Get("/", "acme").Header.Get("X-RateLimit-Remaining"); got != want {
			t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
		}
	}
	outside := adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil))
	if _, err := rule.Key(outside); err == nil || errors.Is(err, core.ErrNoIdentity) {
		t.Errorf("native key outside Fiber: %v, want an error not wrapping ErrNoIdentity", err)
	}
	if got := rule.Cost(outside); got != 0 {
		t.Errorf("native cost outside Fiber: %d, want 0", got)
	}
}

// The identity that Key returns is a copy: it may be a string of
// fasthttp's, such as c.Get's, which fasthttp reuses once the handler
// returns.
func TestKeyCopiesIdentity(t *testing.T) {
	key := fiberlimit.Key(func(c *fiber.Ctx) (string, error) { return c.Get(adaptertest.ClientHeader), nil })
	var mu sync.Mutex
	var kept []string
	rule := core.Rule{Name: "default", Limit: core.PerMinute(100), Key: func(r core.Request) (string, error) {
		id, err := key(r)
		mu.Lock()
		kept = append(kept, id)
		mu.Unlock()
		return id, err
	}}
	l, _ := adaptertest.NewLimiter(t)
	app := serve(t, newApp(fiberlimit.MustNew(l, []core.Rule{rule})), nil)
	clients := []string{"acme", "bolt", "cork", "dune", "acme-with-a-longer-name", "e"}
	for _, client := range clients {
		app.Get("/", client)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := fmt.Sprint(kept), fmt.Sprint(clients); got != want {
		t.Errorf("identities kept after their requests: %s, want %s", got, want)
	}
}

// The core.Request view reads fasthttp's request directly: the socket
// peer, never a forwarding header, as RemoteAddr.
func TestRequestView(t *testing.T) {
	var got []string
	rule := core.Rule{Name: "view", Limit: core.PerMinute(10), Key: func(r core.Request) (string, error) {
		got = append(got, r.Method(), r.Path(), r.Route(), r.Header("X-A"), fmt.Sprint(r.HeaderValues("X-B")), fmt.Sprint(r.HeaderValues("X-C") == nil), r.Query("q"), r.RemoteAddr())
		return "static:view", nil
	}}
	l, _ := adaptertest.NewLimiter(t)
	app := fiber.New(fiber.Config{ProxyHeader: "X-Forwarded-For"})
	app.Get("/items/:id", fiberlimit.MustNew(l, []core.Rule{rule}), ok)
	r := httptest.NewRequest("GET", "/items/7?q=x", nil)
	r.Header.Set("X-A", "a")
	r.Header.Add("X-B", "1")
	r.Header.Add("X-B", "2")
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	if _, err := app.Test(r, -1); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(got), "[GET /items/7 /items/:id a [1 2] true x 0.0.0.0:0]"; got != want {
		t.Errorf("view %s, want %s", got, want)
	}
}

// A nil option, and options given a nil function, are rejected.
func TestNilOptions(t *testing.T) {
	adaptertest.RejectsOptions(t, "fiberlimit.New", fiberlimit.New, fiberlimit.MustNew, map[string]fiberlimit.Option{
		adaptertest.NilOption: nil,
		"WithNext":            fiberlimit.WithNext(nil),
		"WithDeniedHandler":   fiberlimit.WithDeniedHandler(nil),
		"WithErrorHandler":    fiberlimit.WithErrorHandler(nil),
	})
}
