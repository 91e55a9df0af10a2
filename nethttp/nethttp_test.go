package nethttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/nethttp"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

func get(h http.Handler, target, client string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", target, nil)
	if client != "" {
		r.Header.Set(adaptertest.ClientHeader, client)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
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
	h := nethttp.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 100)})(ok)
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
			h := nethttp.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)}, nethttp.WithHeaders(tt.style), nethttp.WithIETFDraft(core.IETFDraft10))(ok)
			checkFields(t, get(h, "/", "a").Header(), tt.want)
		})
	}
}

func TestSkip(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	h := nethttp.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)},
		nethttp.WithSkip(func(r *http.Request) bool { return r.URL.Path == "/healthz" }))(ok)
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

// A global per-client limit, and a per-route limit on one route keyed by
// the ServeMux pattern: both apply there, only the global one elsewhere.
func TestPerRouteStacking(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	global := nethttp.MustNew(l, []core.Rule{adaptertest.FixedRule("global", 100)})
	perRoute := nethttp.MustNew(l, []core.Rule{{
		Name:  "users",
		Limit: core.Limit{Rate: 2, Period: 60e9, Algorithm: core.FixedWindow},
		Key:   keyfuncs.Join(keyfuncs.Route(), adaptertest.ClientKey()),
	}})
	var patterns []string
	mux := http.NewServeMux()
	mux.Handle("GET /users/{id}", perRoute(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		patterns = append(patterns, r.Pattern)
	})))
	mux.Handle("GET /", ok)
	h := global(mux)

	// three IDs, one route: one limit of 2
	for i, want := range []int{200, 200, 429} {
		w := get(h, fmt.Sprintf("/users/%d", i+1), "a")
		if w.Code != want {
			t.Fatalf("request %d to /users/{id}: status %d, want %d", i+1, w.Code, want)
		}
		// the per-route rule is the more restrictive: it drives X-RateLimit-*
		if got, want := w.Header().Get("X-RateLimit-Limit"), "2"; got != want {
			t.Errorf("request %d: X-RateLimit-Limit %q, want %q", i+1, got, want)
		}
		if got, want := w.Header().Get("RateLimit-Policy"), `"global";q=100;w=60, "users";q=2;w=60`; got != want {
			t.Errorf("request %d: RateLimit-Policy %s, want %s", i+1, got, want)
		}
	}
	if got, want := fmt.Sprint(patterns), "[GET /users/{id} GET /users/{id}]"; got != want {
		t.Errorf("patterns %s, want %s", got, want)
	}
	// the global limit counted all three; the other route is not limited by "users"
	w := get(h, "/", "a")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /: status %d", w.Code)
	}
	checkFields(t, w.Header(), map[string]string{"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "96", "RateLimit-Policy": `"global";q=100;w=60`})
	// another client has its own per-route quota
	if got, want := get(h, "/users/1", "b").Code, http.StatusOK; got != want {
		t.Errorf("other client: status %d, want %d", got, want)
	}
}

func TestWithRoute(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := core.Rule{Name: "route", Limit: core.PerMinute(1), Key: keyfuncs.Route()}
	h := nethttp.MustNew(l, []core.Rule{rule}, nethttp.WithRoute(func(*http.Request) string { return "/items/:id" }))(ok)
	if got, want := get(h, "/items/1", "").Code, http.StatusOK; got != want {
		t.Fatalf("first request: status %d, want %d", got, want)
	}
	if got, want := get(h, "/items/2", "").Code, http.StatusTooManyRequests; got != want {
		t.Errorf("second request, same route: status %d, want %d", got, want)
	}
}

func TestCustomHandlers(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	var gotErr error
	h, err := nethttp.Wrap(ok, l, []core.Rule{adaptertest.FixedRule("default", 1)},
		nethttp.WithNoIdentity(core.NoIdentity401),
		nethttp.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d core.Decision) {
			res, _ := d.LimitingResult()
			w.WriteHeader(http.StatusTeapot)
			fmt.Fprintf(w, "slow down: %s, retry after %s", res.Rule, w.Header().Get("Retry-After"))
		}),
		nethttp.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			gotErr = err
			http.Error(w, "who are you?", http.StatusForbidden)
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	get(h, "/", "a")
	w := get(h, "/", "a")
	if got, want := w.Code, http.StatusTeapot; got != want {
		t.Errorf("denied: status %d, want %d", got, want)
	}
	if got, want := w.Body.String(), "slow down: default, retry after 30"; got != want {
		t.Errorf("denied: body %q, want %q", got, want)
	}
	w = get(h, "/", "")
	if got, want := w.Code, http.StatusForbidden; got != want {
		t.Errorf("no identity: status %d, want %d", got, want)
	}
	if !errors.Is(gotErr, core.ErrNoIdentity) {
		t.Errorf("error handler got %v, want an error wrapping ErrNoIdentity", gotErr)
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
		h := nethttp.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)}, nethttp.WithNoIdentity(tt.policy))(ok)
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
	h := nethttp.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)})(ok)
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
		opts   []nethttp.Option
		want   [2]int // statuses of two requests under a limit of 1
		fields bool   // whether X-RateLimit-* is set
	}{
		{"local", core.FailLocal, nil, [2]int{200, 429}, true},
		{"open", core.FailOpen, nil, [2]int{200, 200}, true},
		{"closed", core.FailClosed, nil, [2]int{503, 503}, false},
		{"closed, status chosen", core.FailClosed, []nethttp.Option{nethttp.WithFailClosedStatus(http.StatusTooManyRequests)}, [2]int{429, 429}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(tt.policy))
			h := nethttp.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 1)}, tt.opts...)(ok)
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
						t.Errorf("request %d: body %s (%v), want a %d problem", i+1, w.Body, err, want)
					}
				}
			}
		})
	}
}

func TestStoreFailureErrorHandler(t *testing.T) {
	l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(core.FailClosed))
	var gotErr error
	h := nethttp.MustNew(l, []core.Rule{adaptertest.FixedRule("default", 10)},
		nethttp.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			gotErr = err
			w.WriteHeader(http.StatusBadGateway)
		}))(ok)
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
		opts  []nethttp.Option
	}{
		{"nil limiter", nil, rules, nil},
		{"no rules", l, nil, nil},
		{"nil option", l, rules, []nethttp.Option{nil}},
		{"nil skip", l, rules, []nethttp.Option{nethttp.WithSkip(nil)}},
		{"nil route", l, rules, []nethttp.Option{nethttp.WithRoute(nil)}},
		{"nil denied handler", l, rules, []nethttp.Option{nethttp.WithDeniedHandler(nil)}},
		{"nil error handler", l, rules, []nethttp.Option{nethttp.WithErrorHandler(nil)}},
		{"bad fail-closed status", l, rules, []nethttp.Option{nethttp.WithFailClosedStatus(200)}},
		{"bad header style", l, rules, []nethttp.Option{nethttp.WithHeaders(7)}},
		{"bad draft", l, rules, []nethttp.Option{nethttp.WithIETFDraft(2)}},
		{"bad no-identity policy", l, rules, []nethttp.Option{nethttp.WithNoIdentity(7)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := nethttp.New(tt.l, tt.rules, tt.opts...); err == nil {
				t.Error("New succeeded, want an error")
			}
			if _, err := nethttp.Wrap(ok, tt.l, tt.rules, tt.opts...); err == nil {
				t.Error("Wrap succeeded, want an error")
			}
			defer func() {
				if recover() == nil {
					t.Error("MustNew did not panic")
				}
			}()
			nethttp.MustNew(tt.l, tt.rules, tt.opts...)
		})
	}
}
