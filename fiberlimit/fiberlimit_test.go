package fiberlimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
)

func ok(c *fiber.Ctx) error { return c.SendString("ok") }

type response struct {
	Code   int
	Header http.Header
	Body   string
}

func send(t *testing.T, app *fiber.App, method, target, client string) response {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	if client != "" {
		r.Header.Set(adaptertest.ClientHeader, client)
	}
	resp, err := app.Test(r, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(body)}
}

func get(t *testing.T, app *fiber.App, target, client string) response {
	t.Helper()
	return send(t, app, "GET", target, client)
}

// newApp returns an app that serves ok on GET / and /healthz behind mws.
func newApp(mws ...fiber.Handler) *fiber.App {
	app := fiber.New()
	for _, mw := range mws {
		app.Use(mw)
	}
	app.Get("/", ok)
	app.Get("/healthz", ok)
	return app
}

func checkFields(t *testing.T, h http.Header, want map[string]string) {
	t.Helper()
	for name, v := range want {
		if got := h.Values(name); (v == "" && len(got) != 0) || (v != "" && (len(got) != 1 || got[0] != v)) {
			t.Errorf("%s: %q, want %q", name, got, v)
		}
	}
}

func TestHeadersAndDenial(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	app := newApp(fiberlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 100)}))
	for i := range 57 {
		if w := get(t, app, "/", "a"); w.Code != http.StatusOK {
			t.Fatalf("request %d: status %d", i+1, w.Code)
		}
	}
	w := get(t, app, "/", "a")
	if got, want := w.Code, http.StatusOK; got != want {
		t.Fatalf("58th request: status %d, want %d", got, want)
	}
	checkFields(t, w.Header, map[string]string{
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "42",
		"X-RateLimit-Reset":     "30",
		"RateLimit-Policy":      `"default";q=100;w=60`,
		"RateLimit":             `"default";r=42;t=30`,
		"Retry-After":           "",
	})
	if got, want := w.Body, "ok"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
	for range 42 {
		get(t, app, "/", "a")
	}
	w = get(t, app, "/", "a")
	if got, want := w.Code, http.StatusTooManyRequests; got != want {
		t.Fatalf("101st request: status %d, want %d", got, want)
	}
	checkFields(t, w.Header, map[string]string{
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "30",
		"RateLimit-Policy":      `"default";q=100;w=60`,
		"RateLimit":             `"default";r=0;t=30`,
		"Retry-After":           "30",
		"Content-Type":          "application/problem+json",
	})
	var p struct {
		Title  string `json:"title"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(w.Body), &p); err != nil || p.Status != 429 || p.Title != "Too Many Requests" {
		t.Errorf("body %s (%v), want a 429 problem", w.Body, err)
	}
}

func TestHeaderStyles(t *testing.T) {
	tests := []struct {
		style core.HeaderStyle
		want  map[string]string
	}{
		{core.HeadersBoth, map[string]string{"X-RateLimit-Limit": "10", "RateLimit": `"default";r=9;t=30`}},
		{core.HeadersLegacy, map[string]string{"X-RateLimit-Limit": "10", "RateLimit": "", "RateLimit-Policy": ""}},
		{core.HeadersIETF, map[string]string{"X-RateLimit-Limit": "", "RateLimit": `"default";r=9;t=30`}},
		{core.HeadersNone, map[string]string{"X-RateLimit-Limit": "", "X-RateLimit-Remaining": "", "RateLimit": "", "RateLimit-Policy": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.style.String(), func(t *testing.T) {
			l, _ := adaptertest.NewLimiter(t)
			app := newApp(fiberlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)}, fiberlimit.WithHeaders(tt.style), fiberlimit.WithIETFDraft(core.IETFDraft10)))
			checkFields(t, get(t, app, "/", "a").Header, tt.want)
		})
	}
}

func TestNext(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	app := newApp(fiberlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		fiberlimit.WithNext(func(c *fiber.Ctx) bool { return c.Path() == "/healthz" })))
	for range 3 {
		w := get(t, app, "/healthz", "a")
		if w.Code != http.StatusOK || w.Header.Get("X-RateLimit-Limit") != "" {
			t.Fatalf("skipped request: status %d, headers %v", w.Code, w.Header)
		}
	}
	if got, want := get(t, app, "/", "a").Header.Get("X-RateLimit-Remaining"), "0"; got != want {
		t.Errorf("first limited request: remaining %q, want %q (skipped requests spent nothing)", got, want)
	}
	if got, want := get(t, app, "/", "a").Code, http.StatusTooManyRequests; got != want {
		t.Errorf("second limited request: status %d, want %d", got, want)
	}
}

// A global per-client limit, a per-route limit keyed by the route pattern,
// and a login limit on a group: they stack.
func TestPerRouteStacking(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	two := core.Limit{Rate: 2, Period: time.Minute, Algorithm: core.FixedWindow}
	app := fiber.New()
	app.Use(fiberlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("global", 100)}))
	perRoute := fiberlimit.MustNew(l, []core.Rule{{
		Name: "users", Limit: two, Key: keyfuncs.Join(keyfuncs.Route(), adaptertest.ClientKey()),
	}})
	var routes []string
	app.Get("/users/:id", perRoute, func(c *fiber.Ctx) error {
		routes = append(routes, c.Route().Path)
		return nil
	})
	auth := app.Group("/auth", fiberlimit.MustNew(l, []core.Rule{{Name: "login", Limit: two, Key: adaptertest.ClientKey()}}))
	auth.Post("/login", ok)
	app.Get("/", ok)

	for i, want := range []int{200, 200, 429} {
		w := get(t, app, fmt.Sprintf("/users/%d", i+1), "a")
		if w.Code != want {
			t.Fatalf("request %d to /users/:id: status %d, want %d", i+1, w.Code, want)
		}
		if got, want := w.Header.Get("X-RateLimit-Limit"), "2"; got != want {
			t.Errorf("request %d: X-RateLimit-Limit %q, want %q", i+1, got, want)
		}
		if got, want := w.Header.Get("RateLimit-Policy"), `"global";q=100;w=60, "users";q=2;w=60`; got != want {
			t.Errorf("request %d: RateLimit-Policy %s, want %s", i+1, got, want)
		}
	}
	if got, want := fmt.Sprint(routes), "[/users/:id /users/:id]"; got != want {
		t.Errorf("routes %s, want %s", got, want)
	}
	for i, want := range []int{200, 200, 429} {
		if w := send(t, app, "POST", "/auth/login", "a"); w.Code != want {
			t.Fatalf("login %d: status %d, want %d", i+1, w.Code, want)
		}
	}
	w := get(t, app, "/", "a")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /: status %d", w.Code)
	}
	checkFields(t, w.Header, map[string]string{"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "93", "RateLimit-Policy": `"global";q=100;w=60`})
	if got, want := get(t, app, "/users/1", "b").Code, http.StatusOK; got != want {
		t.Errorf("other client: status %d, want %d", got, want)
	}
}

func TestNativeKeyAndCost(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := core.Rule{
		Name:  "tenant",
		Limit: core.Limit{Rate: 10, Period: time.Minute, Algorithm: core.FixedWindow},
		// c.Get's string is fasthttp's buffer: Key copies it
		Key: fiberlimit.Key(func(c *fiber.Ctx) (string, error) {
			if id := c.Get(adaptertest.ClientHeader); id != "" {
				return id, nil
			}
			return "", core.ErrNoIdentity
		}),
		Cost: fiberlimit.Cost(func(c *fiber.Ctx) int { n, _ := c.Locals("cost").(int); return n }),
	}
	app := newApp(func(c *fiber.Ctx) error {
		c.Locals("cost", 3)
		return c.Next()
	}, fiberlimit.MustNew(l, []core.Rule{rule}))
	for _, want := range []string{"7", "4", "1"} {
		if got := get(t, app, "/", "acme").Header.Get("X-RateLimit-Remaining"); got != want {
			t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
		}
		get(t, app, "/", "other-client-with-a-longer-name") // reuses the buffers
	}
	if _, err := rule.Key(core.HTTPRequest(httptest.NewRequest("GET", "/", nil))); err == nil || errors.Is(err, core.ErrNoIdentity) {
		t.Errorf("native key outside Fiber: %v, want an error not wrapping ErrNoIdentity", err)
	}
	if got := rule.Cost(core.HTTPRequest(httptest.NewRequest("GET", "/", nil))); got != 0 {
		t.Errorf("native cost outside Fiber: %d, want 0", got)
	}
}

func TestCustomHandlers(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	var gotErr error
	reached := 0
	app := newApp(fiberlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		fiberlimit.WithNoIdentity(core.NoIdentity401),
		fiberlimit.WithDeniedHandler(func(c *fiber.Ctx, d core.Decision) error {
			res, _ := d.LimitingResult()
			return c.Status(http.StatusTeapot).SendString(fmt.Sprintf("slow down: %s, retry after %s", res.Rule, c.GetRespHeader("Retry-After")))
		}),
		fiberlimit.WithErrorHandler(func(c *fiber.Ctx, err error) error {
			gotErr = err
			return fiber.NewError(http.StatusForbidden, "who are you?")
		}),
	), func(c *fiber.Ctx) error { reached++; return c.Next() })
	get(t, app, "/", "a")
	w := get(t, app, "/", "a")
	if got, want := w.Code, http.StatusTeapot; got != want {
		t.Errorf("denied: status %d, want %d", got, want)
	}
	if got, want := w.Body, "slow down: default, retry after 30"; got != want {
		t.Errorf("denied: body %q, want %q", got, want)
	}
	w = get(t, app, "/", "")
	if got, want := w.Code, http.StatusForbidden; got != want {
		t.Errorf("no identity: status %d, want %d (from Fiber's error handler)", got, want)
	}
	if !errors.Is(gotErr, core.ErrNoIdentity) {
		t.Errorf("error handler got %v, want an error wrapping ErrNoIdentity", gotErr)
	}
	if reached != 1 {
		t.Errorf("the chain went on after %d requests, want 1", reached)
	}
}

func TestNoIdentity(t *testing.T) {
	tests := []struct {
		policy core.NoIdentityPolicy
		want   int
	}{
		{core.NoIdentityNext, http.StatusOK},
		{core.NoIdentity401, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		l, _ := adaptertest.NewLimiter(t)
		app := newApp(fiberlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)}, fiberlimit.WithNoIdentity(tt.policy)))
		for range 2 {
			w := get(t, app, "/", "")
			if got := w.Code; got != tt.want {
				t.Errorf("policy %d: status %d, want %d", tt.policy, got, tt.want)
			}
			if got := w.Header.Get("X-RateLimit-Limit"); got != "" {
				t.Errorf("policy %d: X-RateLimit-Limit %q, want none", tt.policy, got)
			}
		}
	}
}

func TestContextReachesStore(t *testing.T) {
	clock := adaptertest.NewClock()
	store := &adaptertest.ContextStore{Store: core.NewMemoryStore(core.WithClock(clock.Now))}
	l := adaptertest.NewLimiterOver(t, store)
	app := newApp(func(c *fiber.Ctx) error {
		c.SetUserContext(context.WithValue(context.Background(), adaptertest.ContextKey{}, "request"))
		return c.Next()
	}, fiberlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)}))
	get(t, app, "/", "a")
	if got, want := store.Seen(), "request"; got != want {
		t.Errorf("store saw context value %v, want %v", got, want)
	}
}

func TestRequestView(t *testing.T) {
	var got []string
	rule := core.Rule{Name: "view", Limit: core.PerMinute(10), Key: func(r core.Request) (string, error) {
		got = append(got, r.Method(), r.Path(), r.Route(), r.Header("X-A"), fmt.Sprint(r.HeaderValues("X-B")), r.Query("q"), r.RemoteAddr())
		return "static:view", nil
	}}
	l, _ := adaptertest.NewLimiter(t)
	app := fiber.New()
	app.Get("/items/:id", fiberlimit.MustNew(l, []core.Rule{rule}), ok)
	r := httptest.NewRequest("GET", "/items/7?q=x", nil)
	r.Header.Set("X-A", "a")
	r.Header.Add("X-B", "1")
	r.Header.Add("X-B", "2")
	if _, err := app.Test(r, -1); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(got), "[GET /items/7 /items/:id a [1 2] x 0.0.0.0]"; got != want {
		t.Errorf("view %s, want %s", got, want)
	}
}

// Each failure policy of the Limiter, as the middleware answers it when
// the store fails.
func TestStoreFailure(t *testing.T) {
	tests := []struct {
		name   string
		policy core.FailurePolicy
		opts   []fiberlimit.Option
		want   [2]int // statuses of two requests under a limit of 1
		fields bool   // whether X-RateLimit-* is set
	}{
		{"local", core.FailLocal, nil, [2]int{200, 429}, true},
		{"open", core.FailOpen, nil, [2]int{200, 200}, true},
		{"closed", core.FailClosed, nil, [2]int{503, 503}, false},
		{"closed, status chosen", core.FailClosed, []fiberlimit.Option{fiberlimit.WithFailClosedStatus(http.StatusTooManyRequests)}, [2]int{429, 429}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(tt.policy))
			h := newApp(fiberlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)}, tt.opts...))
			for i, want := range tt.want {
				w := get(t, h, "/", "a")
				if w.Code != want {
					t.Fatalf("request %d: status %d, want %d", i+1, w.Code, want)
				}
				if got := w.Header.Get("X-RateLimit-Limit") != ""; got != tt.fields {
					t.Errorf("request %d: X-RateLimit-Limit set %v, want %v", i+1, got, tt.fields)
				}
				if got, want := w.Header.Get("Retry-After") != "", want != 200; got != want {
					t.Errorf("request %d: Retry-After %q, want one: %v", i+1, w.Header.Get("Retry-After"), want)
				}
				if want != 200 {
					var p struct{ Status int }
					if err := json.Unmarshal([]byte(w.Body), &p); err != nil || p.Status != want || w.Header.Get("Content-Type") != core.ProblemContentType {
						t.Errorf("request %d: body %s (%v), want a %d problem", i+1, []byte(w.Body), err, want)
					}
				}
			}
		})
	}
}

func TestStoreFailureErrorHandler(t *testing.T) {
	l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(core.FailClosed))
	var gotErr error
	h := newApp(fiberlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)},
		fiberlimit.WithErrorHandler(func(c *fiber.Ctx, err error) error {
			gotErr = err
			return c.SendStatus(http.StatusBadGateway)
		})))
	w := get(t, h, "/", "a")
	if got, want := w.Code, http.StatusBadGateway; got != want {
		t.Errorf("status %d, want %d", got, want)
	}
	if w.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After before the error handler ran")
	}
	if !errors.Is(gotErr, core.ErrUnavailable) || !errors.Is(gotErr, adaptertest.ErrStoreDown) {
		t.Errorf("error handler got %v, want one wrapping ErrUnavailable and the store's error", gotErr)
	}
}

func TestNewInvalid(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rules := []core.Rule{adaptertest.FixedRule("default", 1)}
	tests := []struct {
		name  string
		l     *core.Limiter
		rules []core.Rule
		opts  []fiberlimit.Option
	}{
		{"nil limiter", nil, rules, nil},
		{"no rules", l, nil, nil},
		{"nil option", l, rules, []fiberlimit.Option{nil}},
		{"nil next", l, rules, []fiberlimit.Option{fiberlimit.WithNext(nil)}},
		{"nil denied handler", l, rules, []fiberlimit.Option{fiberlimit.WithDeniedHandler(nil)}},
		{"nil error handler", l, rules, []fiberlimit.Option{fiberlimit.WithErrorHandler(nil)}},
		{"bad fail-closed status", l, rules, []fiberlimit.Option{fiberlimit.WithFailClosedStatus(200)}},
		{"bad header style", l, rules, []fiberlimit.Option{fiberlimit.WithHeaders(7)}},
		{"bad draft", l, rules, []fiberlimit.Option{fiberlimit.WithIETFDraft(2)}},
		{"bad no-identity policy", l, rules, []fiberlimit.Option{fiberlimit.WithNoIdentity(7)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := fiberlimit.New(tt.l, tt.rules, tt.opts...); err == nil {
				t.Error("New succeeded, want an error")
			}
			defer func() {
				if recover() == nil {
					t.Error("MustNew did not panic")
				}
			}()
			fiberlimit.MustNew(tt.l, tt.rules, tt.opts...)
		})
	}
}
