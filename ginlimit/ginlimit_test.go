package ginlimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
)

func init() { gin.SetMode(gin.TestMode) }

func ok(c *gin.Context) { c.String(http.StatusOK, "ok") }

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

// app returns an engine that serves ok on GET / behind mws.
func app(mws ...gin.HandlerFunc) *gin.Engine {
	e := gin.New()
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
	h := app(ginlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 100)}))
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
			h := app(ginlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)}, ginlimit.WithHeaders(tt.style), ginlimit.WithIETFDraft(core.IETFDraft10)))
			checkFields(t, get(h, "/", "a").Header(), tt.want)
		})
	}
}

func TestSkip(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	h := app(ginlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		ginlimit.WithSkip(func(c *gin.Context) bool { return c.FullPath() == "/healthz" })))
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
	e := gin.New()
	e.Use(ginlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("global", 100)}))
	users := e.Group("/users", ginlimit.MustNew(l, []core.Rule{{
		Name: "users", Limit: two, Key: keyfuncs.Join(keyfuncs.Route(), adaptertest.ClientKey()),
	}}))
	var routes []string
	users.GET("/:id", func(c *gin.Context) { routes = append(routes, c.FullPath()) })
	login := ginlimit.MustNew(l, []core.Rule{{Name: "login", Limit: two.WithAlgorithm(core.FixedWindow), Key: adaptertest.ClientKey()}})
	e.POST("/login", login, ok)
	e.GET("/", ok)

	for i, want := range []int{200, 200, 429} {
		w := get(e, fmt.Sprintf("/users/%d", i+1), "a")
		if w.Code != want {
			t.Fatalf("request %d to /users/:id: status %d, want %d", i+1, w.Code, want)
		}
		// the per-route rule is the more restrictive: it drives X-RateLimit-*
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
		Key: ginlimit.Key(func(c *gin.Context) (string, error) {
			if id := c.GetString("tenant"); id != "" {
				return "tenant:" + id, nil
			}
			return "", core.ErrNoIdentity
		}),
		Cost: ginlimit.Cost(func(c *gin.Context) int { return c.GetInt("cost") }),
	}
	e := app(func(c *gin.Context) {
		c.Set("tenant", c.GetHeader(adaptertest.ClientHeader))
		c.Set("cost", 3)
	}, ginlimit.MustNew(l, []core.Rule{rule}))
	if got, want := get(e, "/", "acme").Header().Get("X-RateLimit-Remaining"), "7"; got != want {
		t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
	}
	if _, err := rule.Key(core.HTTPRequest(httptest.NewRequest("GET", "/", nil))); err == nil || errors.Is(err, core.ErrNoIdentity) {
		t.Errorf("native key outside Gin: %v, want an error not wrapping ErrNoIdentity", err)
	}
	if got := rule.Cost(core.HTTPRequest(httptest.NewRequest("GET", "/", nil))); got != 0 {
		t.Errorf("native cost outside Gin: %d, want 0", got)
	}
}

func TestCustomHandlers(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	var gotErr error
	reached := 0
	e := app(ginlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		ginlimit.WithNoIdentity(core.NoIdentity401),
		ginlimit.WithDeniedHandler(func(c *gin.Context, d core.Decision) {
			res, _ := d.LimitingResult()
			c.String(http.StatusTeapot, "slow down: %s, retry after %s", res.Rule, c.Writer.Header().Get("Retry-After"))
		}),
		ginlimit.WithErrorHandler(func(c *gin.Context, err error) {
			gotErr = err
			c.String(http.StatusForbidden, "who are you?")
		}),
	), func(c *gin.Context) { reached++ })
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
		t.Errorf("no identity: status %d, want %d", got, want)
	}
	if !errors.Is(gotErr, core.ErrNoIdentity) {
		t.Errorf("error handler got %v, want an error wrapping ErrNoIdentity", gotErr)
	}
	if reached != 1 {
		t.Errorf("the chain went on after %d requests, want 1 (custom handlers abort)", reached)
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
		h := app(ginlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)}, ginlimit.WithNoIdentity(tt.policy)))
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
	h := app(ginlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)}))
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
		opts   []ginlimit.Option
		want   [2]int // statuses of two requests under a limit of 1
		fields bool   // whether X-RateLimit-* is set
	}{
		{"local", core.FailLocal, nil, [2]int{200, 429}, true},
		{"open", core.FailOpen, nil, [2]int{200, 200}, true},
		{"closed", core.FailClosed, nil, [2]int{503, 503}, false},
		{"closed, status chosen", core.FailClosed, []ginlimit.Option{ginlimit.WithFailClosedStatus(http.StatusTooManyRequests)}, [2]int{429, 429}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(tt.policy))
			h := app(ginlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)}, tt.opts...))
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
	h := app(ginlimit.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)},
		ginlimit.WithErrorHandler(func(c *gin.Context, err error) {
			gotErr = err
			c.Status(http.StatusBadGateway)
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
		opts  []ginlimit.Option
	}{
		{"nil limiter", nil, rules, nil},
		{"no rules", l, nil, nil},
		{"nil option", l, rules, []ginlimit.Option{nil}},
		{"nil skip", l, rules, []ginlimit.Option{ginlimit.WithSkip(nil)}},
		{"nil denied handler", l, rules, []ginlimit.Option{ginlimit.WithDeniedHandler(nil)}},
		{"nil error handler", l, rules, []ginlimit.Option{ginlimit.WithErrorHandler(nil)}},
		{"bad fail-closed status", l, rules, []ginlimit.Option{ginlimit.WithFailClosedStatus(200)}},
		{"bad header style", l, rules, []ginlimit.Option{ginlimit.WithHeaders(7)}},
		{"bad draft", l, rules, []ginlimit.Option{ginlimit.WithIETFDraft(2)}},
		{"bad no-identity policy", l, rules, []ginlimit.Option{ginlimit.WithNoIdentity(7)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ginlimit.New(tt.l, tt.rules, tt.opts...); err == nil {
				t.Error("New succeeded, want an error")
			}
			defer func() {
				if recover() == nil {
					t.Error("MustNew did not panic")
				}
			}()
			ginlimit.MustNew(tt.l, tt.rules, tt.opts...)
		})
	}
}
