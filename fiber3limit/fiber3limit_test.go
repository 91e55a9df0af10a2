package fiber3limit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"
	recoverer "github.com/gofiber/fiber/v3/middleware/recover"
	"github.com/valyala/fasthttp"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/fiber3limit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func ok(c fiber.Ctx) error {
	status, asError := adaptertest.AnswerStatus(func(name string) string { return c.Get(name) })
	if asError {
		return fiber.NewError(status, "ok")
	}
	adaptertest.PanicIf(func(name string) string { return c.Get(name) }, "before")
	if adaptertest.StreamAnswer(c.Context(), func(name string) string { return c.Get(name) }, func(line string) error {
		_, err := c.WriteString(line)
		return err
	}, func(n int) { fiber3limit.AddCost(c, n) }) {
		return nil
	}
	err := c.Status(status).SendString("ok")
	fiber3limit.AddCost(c, adaptertest.AnswerCost(func(name string) string { return c.Get(name) }))
	adaptertest.PanicIf(func(name string) string { return c.Get(name) }, "after")
	return err
}

// newApp returns an app that serves ok on GET / and /healthz behind mws,
// each added with Use.
func newApp(mws ...fiber.Handler) *fiber.App {
	app := fiber.New()
	app.Use(recoverer.New()) // a panic becomes an error, answered 500
	for _, mw := range mws {
		app.Use(mw)
	}
	app.Get("/", ok)
	app.Get("/healthz", ok)
	return app
}

// netContext is the fasthttp user value under which fromNet leaves the
// context of the net/http request it converts.
type netContext struct{}

// withNetContext is the first handler of the harness's apps: it makes the
// context of the converted net/http request the request's context in
// Fiber, as an application's middleware would with c.SetContext.
func withNetContext(c fiber.Ctx) error {
	if ctx, ok := c.RequestCtx().UserValue(netContext{}).(context.Context); ok {
		c.SetContext(ctx)
	}
	return c.Next()
}

// fromNet converts a net/http request into a fasthttp one, from the same
// socket peer, carrying r's context as a user value.
func fromNet(r *http.Request) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(r.Method)
	req.SetRequestURI(r.URL.RequestURI())
	req.Header.SetHost(r.Host)
	for name, values := range r.Header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	ctx := new(fasthttp.RequestCtx)
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		panic(err) // httptest.NewRequest's peer always parses
	}
	ctx.Init(&req, net.TCPAddrFromAddrPort(peer), nil)
	ctx.SetUserValue(netContext{}, r.Context())
	return ctx
}

// serve returns the App of app: each request goes through app's fasthttp
// handler, with no connection and no timeout.
func serve(app *fiber.App) adaptertest.App {
	h := app.Handler()
	return func(r *http.Request) adaptertest.Response {
		ctx := fromNet(r)
		h(ctx)
		header := make(http.Header)
		for name, value := range ctx.Response.Header.All() {
			header.Add(string(name), string(value))
		}
		return adaptertest.Response{Status: ctx.Response.StatusCode(), Header: header, Body: string(ctx.Response.Body())}
	}
}

// harness builds Fiber v3 apps for the shared suite. A middleware added
// with Use or on a group reads its own prefix as the route pattern, so the
// per-route middleware sits on its route; the login one is on a group.
var harness = adaptertest.Harness{
	Name: "fiber3limit.New",
	New: func(_ testing.TB, l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (adaptertest.App, error) {
		mw, err := newMiddleware(l, rules, s)
		if err != nil {
			return nil, err
		}
		return serve(newApp(withNetContext, mw)), nil
	},
	Routes: func(_ testing.TB, l *core.Limiter, global, users, login []core.Rule) adaptertest.App {
		app := fiber.New()
		app.Use(fiber3limit.MustNew(l, global))
		app.Get("/users/:id", fiber3limit.MustNew(l, users), ok)
		app.Group("/login", fiber3limit.MustNew(l, login)).Post("/", ok)
		app.Get("/", ok)
		return serve(app)
	},
	Pattern: "/users/:id",
}

func newMiddleware(l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (fiber.Handler, error) {
	opts := adaptertest.Shared(s.Config, fiber3limit.WithHeaders, fiber3limit.WithIETFDraft, fiber3limit.WithFailClosedStatus, fiber3limit.WithNoIdentity)
	opts = append(opts, adaptertest.Quota(s.Config, fiber3limit.WithRuleSet, fiber3limit.WithCountOnly)...)
	opts = append(opts, adaptertest.Charged(s.Config, fiber3limit.WithCharged)...)
	if s.Skip != "" {
		opts = append(opts, fiber3limit.WithNext(func(c fiber.Ctx) bool { return c.Path() == s.Skip }))
	}
	if answer := s.Denied; answer != nil {
		opts = append(opts, fiber3limit.WithDeniedHandler(func(c fiber.Ctx, d core.Decision) error {
			return send(c, answer(d, c.GetRespHeader("Retry-After")))
		}))
	}
	if answer := s.Error; answer != nil {
		opts = append(opts, fiber3limit.WithErrorHandler(func(c fiber.Ctx, status int, err error) error {
			return send(c, answer(status, err, c.GetRespHeader("Retry-After")))
		}))
	}
	if s.Must {
		return fiber3limit.MustNew(l, rules, opts...), nil
	}
	return fiber3limit.New(l, rules, opts...)
}

func send(c fiber.Ctx, a adaptertest.Answer) error { return c.Status(a.Status).SendString(a.Body) }

func TestSuite(t *testing.T) { adaptertest.Run(t, harness) }

// Errors that the denied and error handlers return go to the app's
// ErrorHandler, and the chain stops there.
func TestHandlerErrors(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	reached := 0
	app := serve(newApp(fiber3limit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		fiber3limit.WithNoIdentity(adapter.NoIdentity401),
		fiber3limit.WithDeniedHandler(func(fiber.Ctx, core.Decision) error { return fiber.ErrTooManyRequests }),
		fiber3limit.WithErrorHandler(func(fiber.Ctx, int, error) error {
			return fiber.NewError(http.StatusForbidden, "who are you?")
		}),
	), func(c fiber.Ctx) error { reached++; return c.Next() }))
	app.Get("/", "a")
	r := app.Get("/", "a")
	if got, want := fmt.Sprint(r.Status, " ", r.Body, " ", r.Header.Get("Retry-After")), "429 Too Many Requests 30"; got != want {
		t.Errorf("denied: %q, want %q (from Fiber's error handler, with Retry-After)", got, want)
	}
	if r := app.Get("/", ""); r.Status != http.StatusForbidden || r.Body != "who are you?" {
		t.Errorf("no identity: %d %q, want 403 from Fiber's error handler", r.Status, r.Body)
	}
	if reached != 1 {
		t.Errorf("the chain went on after %d requests, want 1", reached)
	}
}

// Key and cost functions over the fiber.Ctx read what an earlier handler
// put there, and fail outside Fiber.
func TestNativeKeyAndCost(t *testing.T) {
	tenant := fiber3limit.Key(func(c fiber.Ctx) (string, error) {
		if id := fiber.Locals[string](c, "tenant"); id != "" {
			return "tenant:" + id, nil
		}
		return "", core.ErrNoIdentity
	})
	cost := fiber3limit.Cost(func(c fiber.Ctx) int { return fiber.Locals[int](c, "cost") })
	rule := core.Rule{Name: "tenant", Limit: core.Limit{Rate: 10, Period: time.Minute, Algorithm: core.FixedWindow}, Key: tenant, Cost: cost}
	l, _ := adaptertest.NewLimiter(t)
	app := serve(newApp(func(c fiber.Ctx) error {
		fiber.Locals(c, "tenant", strings.Clone(c.Get(adaptertest.ClientHeader)))
		fiber.Locals(c, "cost", 3)
		return c.Next()
	}, fiber3limit.MustNew(l, []core.Rule{rule})))
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
		t.Errorf("native key outside Fiber: %v, want an error not wrapping ErrNoIdentity", err)
	}
	if got := cost(outside); got != 0 {
		t.Errorf("native cost outside Fiber: %d, want 0", got)
	}
}

// The identity that Key returns is a copy: it may be a string of
// fasthttp's, such as c.Get's, which fasthttp reuses once the handler
// returns. The requests go over a real connection, whose buffers fasthttp
// reuses from one request to the next.
func TestKeyCopiesIdentity(t *testing.T) {
	key := fiber3limit.Key(func(c fiber.Ctx) (string, error) { return c.Get(adaptertest.ClientHeader), nil })
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
	app := newApp(fiber3limit.MustNew(l, []core.Rule{rule}))
	clients := []string{"acme", "bolt", "cork", "dune", "acme-with-a-longer-name", "e"}
	for _, client := range clients {
		resp, err := app.Test(adaptertest.NewRequest("GET", "/", client), fiber.TestConfig{})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := fmt.Sprint(kept), fmt.Sprint(clients); got != want {
		t.Errorf("identities kept after their requests: %s, want %s", got, want)
	}
}

// The core.Request view reads fasthttp's request directly: the socket
// peer as RemoteAddr, never the ProxyHeader that c.IP() believes from a
// proxy the app trusts.
func TestRequestView(t *testing.T) {
	var got []string
	rule := core.Rule{Name: "view", Limit: core.PerMinute(10), Key: func(r core.Request) (string, error) {
		got = append(got, r.Method(), r.Path(), r.Route(), r.Header("X-A"), fmt.Sprint(r.HeaderValues("X-B")),
			fmt.Sprint(r.HeaderValues("X-C") == nil), r.Query("q"), r.RemoteAddr())
		return "static:view", nil
	}}
	l, _ := adaptertest.NewLimiter(t)
	app := fiber.New(fiber.Config{
		ProxyHeader:      "X-Forwarded-For",
		TrustProxy:       true,
		TrustProxyConfig: fiber.TrustProxyConfig{Proxies: []string{"192.0.2.1"}}, // the test's peer
	})
	app.Use(func(c fiber.Ctx) error {
		got = append(got, "c.IP()="+c.IP())
		return c.Next()
	})
	app.Get("/items/:id", fiber3limit.MustNew(l, []core.Rule{rule}), ok)
	r := httptest.NewRequest("GET", "/items/7?q=x", nil)
	r.Header.Set("X-A", "a")
	r.Header.Add("X-B", "1")
	r.Header.Add("X-B", "2")
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	if resp := serve(app)(r); resp.Status != http.StatusOK {
		t.Fatalf("status %d", resp.Status)
	}
	if got, want := fmt.Sprint(got), "[c.IP()=203.0.113.9 GET /items/7 /items/:id a [1 2] true x 192.0.2.1]"; got != want {
		t.Errorf("view %s, want %s", got, want)
	}
}

// A nil option, and options given a nil function, are rejected.
func TestNilOptions(t *testing.T) {
	adaptertest.RejectsOptions(t, "fiber3limit.New", fiber3limit.New, fiber3limit.MustNew, map[string]fiber3limit.Option{
		adaptertest.NilOption: nil,
		"WithNext":            fiber3limit.WithNext(nil),
		"WithDeniedHandler":   fiber3limit.WithDeniedHandler(nil),
		"WithErrorHandler":    fiber3limit.WithErrorHandler(nil),
	})
}
