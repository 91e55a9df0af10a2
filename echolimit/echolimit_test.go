package echolimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
)

func ok(c echo.Context) error { return c.String(http.StatusOK, "ok") }

func send(h http.Handler, method, target, client string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	if client != "" {
		r.Header.Set(adaptertest.ClientHeader, client)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func get(h http.Handler, target, client string) *httptest.ResponseRecorder {
	return send(h, "GET", target, client)
}

// app returns an Echo that serves ok on GET / and /healthz behind mws.
func app(mws ...echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.Use(mws...)
	e.GET("/", ok)
	e.GET("/healthz", ok)
	return e
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
	h := app(echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 100)}))
	for i := range 57 {
		if w := get(h, "/", "a"); w.Code != http.StatusOK {
			t.Fatalf("request %d: status %d", i+1, w.Code)
		}
	}
	w := get(h, "/", "a")
	if got, want := w.Code, http.StatusOK; got != want {
		t.Fatalf("58th request: status %d, want %d", got, want)
	}
	checkFields(t, w.Header(), map[string]string{
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "42",
		"X-RateLimit-Reset":     "30",
		"RateLimit-Policy":      `"default";q=100;w=60`,
		"RateLimit":             `"default";r=42;t=30`,
		"Retry-After":           "",
	})
	if got, want := w.Body.String(), "ok"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
	for range 42 {
		get(h, "/", "a")
	}
	w = get(h, "/", "a")
	if got, want := w.Code, http.StatusTooManyRequests; got != want {
		t.Fatalf("101st request: status %d, want %d", got, want)
	}
	checkFields(t, w.Header(), map[string]string{
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
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != 429 || p.Title != "Too Many Requests" {
		t.Errorf("body %s (%v), want a 429 problem", w.Body, err)
	}
}

// The middleware called directly on a context made with Echo's test
// helper, as handler tests do.
func TestNewContext(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	mw := echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)})
	e := echo.New()
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set(adaptertest.ClientHeader, "a")
		w := httptest.NewRecorder()
		c := e.NewContext(r, w)
		if err := mw(ok)(c); err != nil {
			t.Fatal(err)
		}
		if w.Code != want {
			t.Errorf("request %d: status %d, want %d", i+1, w.Code, want)
		}
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
			h := app(echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)}, echolimit.WithHeaders(tt.style), echolimit.WithIETFDraft(core.IETFDraft10)))
			checkFields(t, get(h, "/", "a").Header(), tt.want)
		})
	}
}

func TestSkipper(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	h := app(echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		echolimit.WithSkipper(func(c echo.Context) bool { return c.Path() == "/healthz" })))
	for range 3 {
		w := get(h, "/healthz", "a")
		if w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Limit") != "" {
			t.Fatalf("skipped request: status %d, headers %v", w.Code, w.Header())
		}
	}
	if got, want := get(h, "/", "a").Header().Get("X-RateLimit-Remaining"), "0"; got != want {
		t.Errorf("first limited request: remaining %q, want %q (skipped requests spent nothing)", got, want)
	}
	if got, want := get(h, "/", "a").Code, http.StatusTooManyRequests; got != want {
		t.Errorf("second limited request: status %d, want %d", got, want)
	}
}

// A global per-client limit, a per-route limit on a group keyed by the
// route pattern, and a login limit on one route: they stack.
func TestPerRouteStacking(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	two := core.Limit{Rate: 2, Period: time.Minute, Algorithm: core.FixedWindow}
	e := echo.New()
	e.Use(echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("global", 100)}))
	users := e.Group("/users", echolimit.MustNew(l, []core.Rule{{
		Name: "users", Limit: two, Key: keyfuncs.Join(keyfuncs.Route(), adaptertest.ClientKey()),
	}}))
	var routes []string
	users.GET("/:id", func(c echo.Context) error { routes = append(routes, c.Path()); return nil })
	e.POST("/login", ok, echolimit.MustNew(l, []core.Rule{{Name: "login", Limit: two, Key: adaptertest.ClientKey()}}))
	e.GET("/", ok)

	for i, want := range []int{200, 200, 429} {
		w := get(e, fmt.Sprintf("/users/%d", i+1), "a")
		if w.Code != want {
			t.Fatalf("request %d to /users/:id: status %d, want %d", i+1, w.Code, want)
		}
		if got, want := w.Header().Get("X-RateLimit-Limit"), "2"; got != want {
			t.Errorf("request %d: X-RateLimit-Limit %q, want %q", i+1, got, want)
		}
		if got, want := w.Header().Get("RateLimit-Policy"), `"global";q=100;w=60, "users";q=2;w=60`; got != want {
			t.Errorf("request %d: RateLimit-Policy %s, want %s", i+1, got, want)
		}
	}
	if got, want := fmt.Sprint(routes), "[/users/:id /users/:id]"; got != want {
		t.Errorf("routes %s, want %s", got, want)
	}
	for i, want := range []int{200, 200, 429} {
		if w := send(e, "POST", "/login", "a"); w.Code != want {
			t.Fatalf("login %d: status %d, want %d", i+1, w.Code, want)
		}
	}
	w := get(e, "/", "a")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /: status %d", w.Code)
	}
	checkFields(t, w.Header(), map[string]string{"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "93", "RateLimit-Policy": `"global";q=100;w=60`})
	if got, want := get(e, "/users/1", "b").Code, http.StatusOK; got != want {
		t.Errorf("other client: status %d, want %d", got, want)
	}
}

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
	e := app(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set("tenant", c.Request().Header.Get(adaptertest.ClientHeader))
			c.Set("cost", 3)
			return next(c)
		}
	}, echolimit.MustNew(l, []core.Rule{rule}))
	if got, want := get(e, "/", "acme").Header().Get("X-RateLimit-Remaining"), "7"; got != want {
		t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
	}
	if _, err := rule.Key(core.HTTPRequest(httptest.NewRequest("GET", "/", nil))); err == nil || errors.Is(err, core.ErrNoIdentity) {
		t.Errorf("native key outside Echo: %v, want an error not wrapping ErrNoIdentity", err)
	}
	if got := rule.Cost(core.HTTPRequest(httptest.NewRequest("GET", "/", nil))); got != 0 {
		t.Errorf("native cost outside Echo: %d, want 0", got)
	}
}

func TestCustomHandlers(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	var gotErr error
	reached := 0
	e := app(echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		echolimit.WithNoIdentity(core.NoIdentity401),
		echolimit.WithDeniedHandler(func(c echo.Context, d core.Decision) error {
			res, _ := d.LimitingResult()
			return c.String(http.StatusTeapot, fmt.Sprintf("slow down: %s, retry after %s", res.Rule, c.Response().Header().Get("Retry-After")))
		}),
		echolimit.WithErrorHandler(func(c echo.Context, err error) error {
			gotErr = err
			return echo.NewHTTPError(http.StatusForbidden, "who are you?")
		}),
	), func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { reached++; return next(c) }
	})
	get(e, "/", "a")
	w := get(e, "/", "a")
	if got, want := w.Code, http.StatusTeapot; got != want {
		t.Errorf("denied: status %d, want %d", got, want)
	}
	if got, want := w.Body.String(), "slow down: default, retry after 30"; got != want {
		t.Errorf("denied: body %q, want %q", got, want)
	}
	w = get(e, "/", "")
	if got, want := w.Code, http.StatusForbidden; got != want {
		t.Errorf("no identity: status %d, want %d (from Echo's error handler)", got, want)
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
		h := app(echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)}, echolimit.WithNoIdentity(tt.policy)))
		for range 2 {
			w := get(h, "/", "")
			if got := w.Code; got != tt.want {
				t.Errorf("policy %d: status %d, want %d", tt.policy, got, tt.want)
			}
			if got := w.Header().Get("X-RateLimit-Limit"); got != "" {
				t.Errorf("policy %d: X-RateLimit-Limit %q, want none", tt.policy, got)
			}
		}
	}
}

func TestContextReachesStore(t *testing.T) {
	clock := adaptertest.NewClock()
	store := &adaptertest.ContextStore{Store: core.NewMemoryStore(core.WithClock(clock.Now))}
	l := adaptertest.NewLimiterOver(t, store)
	h := app(echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)}))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set(adaptertest.ClientHeader, "a")
	r = r.WithContext(context.WithValue(r.Context(), adaptertest.ContextKey{}, "request"))
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got, want := store.Seen(), "request"; got != want {
		t.Errorf("store saw context value %v, want %v", got, want)
	}
}

// Each failure policy of the Limiter, as the middleware answers it when
// the store fails.
func TestStoreFailure(t *testing.T) {
	tests := []struct {
		name   string
		policy core.FailurePolicy
		opts   []echolimit.Option
		want   [2]int // statuses of two requests under a limit of 1
		fields bool   // whether X-RateLimit-* is set
	}{
		{"local", core.FailLocal, nil, [2]int{200, 429}, true},
		{"open", core.FailOpen, nil, [2]int{200, 200}, true},
		{"closed", core.FailClosed, nil, [2]int{503, 503}, false},
		{"closed, status chosen", core.FailClosed, []echolimit.Option{echolimit.WithFailClosedStatus(http.StatusTooManyRequests)}, [2]int{429, 429}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(tt.policy))
			h := app(echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)}, tt.opts...))
			for i, want := range tt.want {
				w := get(h, "/", "a")
				if w.Code != want {
					t.Fatalf("request %d: status %d, want %d", i+1, w.Code, want)
				}
				if got := w.Header().Get("X-RateLimit-Limit") != ""; got != tt.fields {
					t.Errorf("request %d: X-RateLimit-Limit set %v, want %v", i+1, got, tt.fields)
				}
				if got, want := w.Header().Get("Retry-After") != "", want != 200; got != want {
					t.Errorf("request %d: Retry-After %q, want one: %v", i+1, w.Header().Get("Retry-After"), want)
				}
				if want != 200 {
					var p struct{ Status int }
					if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != want || w.Header().Get("Content-Type") != core.ProblemContentType {
						t.Errorf("request %d: body %s (%v), want a %d problem", i+1, w.Body.Bytes(), err, want)
					}
				}
			}
		})
	}
}

func TestStoreFailureErrorHandler(t *testing.T) {
	l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(core.FailClosed))
	var gotErr error
	h := app(echolimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)},
		echolimit.WithErrorHandler(func(c echo.Context, err error) error {
			gotErr = err
			return c.NoContent(http.StatusBadGateway)
		})))
	w := get(h, "/", "a")
	if got, want := w.Code, http.StatusBadGateway; got != want {
		t.Errorf("status %d, want %d", got, want)
	}
	if w.Header().Get("Retry-After") == "" {
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
		opts  []echolimit.Option
	}{
		{"nil limiter", nil, rules, nil},
		{"no rules", l, nil, nil},
		{"nil option", l, rules, []echolimit.Option{nil}},
		{"nil skipper", l, rules, []echolimit.Option{echolimit.WithSkipper(nil)}},
		{"nil denied handler", l, rules, []echolimit.Option{echolimit.WithDeniedHandler(nil)}},
		{"nil error handler", l, rules, []echolimit.Option{echolimit.WithErrorHandler(nil)}},
		{"bad fail-closed status", l, rules, []echolimit.Option{echolimit.WithFailClosedStatus(200)}},
		{"bad header style", l, rules, []echolimit.Option{echolimit.WithHeaders(7)}},
		{"bad draft", l, rules, []echolimit.Option{echolimit.WithIETFDraft(2)}},
		{"bad no-identity policy", l, rules, []echolimit.Option{echolimit.WithNoIdentity(7)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := echolimit.New(tt.l, tt.rules, tt.opts...); err == nil {
				t.Error("New succeeded, want an error")
			}
			defer func() {
				if recover() == nil {
					t.Error("MustNew did not panic")
				}
			}()
			echolimit.MustNew(tt.l, tt.rules, tt.opts...)
		})
	}
}
