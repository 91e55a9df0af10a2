package core_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
)

// problemBody is the default body of a middleware's answers.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

func clientRequest(client string) core.Request {
	r := httptest.NewRequest("GET", "/", nil)
	if client != "" {
		r.Header.Set(adaptertest.ClientHeader, client)
	}
	return core.HTTPRequest(r)
}

func TestMiddlewareHandle(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	m, err := core.NewMiddleware(l, []core.Rule{adaptertest.FixedRule("default", 100)}, core.MiddlewareConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for range 57 {
		if out := m.Handle(clientRequest("a")); !out.Proceed() {
			t.Fatalf("early request: status %d, err %v", out.Status, out.Err)
		}
	}
	out := m.Handle(clientRequest("a"))
	if !out.Proceed() || out.Limited() || out.Err != nil || out.Body != nil {
		t.Fatalf("58th request: %+v, want to proceed", out)
	}
	want := []core.Header{
		{Name: core.HeaderLimit, Value: "100"},
		{Name: core.HeaderRemaining, Value: "42"},
		{Name: core.HeaderReset, Value: "30"},
		{Name: core.HeaderPolicy, Value: `"default";q=100;w=60`},
		{Name: core.HeaderRateLimit, Value: `"default";r=42;t=30`},
	}
	checkHeaders(t, out.Headers, want)

	for range 42 {
		m.Handle(clientRequest("a"))
	}
	out = m.Handle(clientRequest("a"))
	if got, want := out.Status, http.StatusTooManyRequests; got != want {
		t.Fatalf("101st request: status %d, want %d", got, want)
	}
	if !out.Limited() || out.Proceed() || out.Err != nil || out.Decision.Allowed {
		t.Errorf("101st request: %+v, want limited", out)
	}
	checkHeaders(t, out.Headers, []core.Header{
		{Name: core.HeaderLimit, Value: "100"},
		{Name: core.HeaderRemaining, Value: "0"},
		{Name: core.HeaderReset, Value: "30"},
		{Name: core.HeaderPolicy, Value: `"default";q=100;w=60`},
		{Name: core.HeaderRateLimit, Value: `"default";r=0;t=30`},
		{Name: core.HeaderRetryAfter, Value: "30"},
	})
	checkProblem(t, out.Body, http.StatusTooManyRequests)

	// another client has its own quota
	if out := m.Handle(clientRequest("b")); !out.Proceed() {
		t.Errorf("other client: status %d, want to proceed", out.Status)
	}
}

func checkHeaders(t *testing.T, h core.Headers, want []core.Header) {
	t.Helper()
	if got, want := h.Len(), len(want); got != want {
		t.Errorf("%d header fields, want %d", got, want)
	}
	for i := range min(h.Len(), len(want)) {
		if got, want := h.At(i), want[i]; got != want {
			t.Errorf("field %d = %q, want %q", i, got, want)
		}
	}
}

func checkProblem(t *testing.T, body []byte, status int) {
	t.Helper()
	var p problemBody
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if p.Status != status || p.Title != http.StatusText(status) || p.Type != "about:blank" || p.Detail == "" {
		t.Errorf("body %+v, want status %d titled %q", p, status, http.StatusText(status))
	}
}

func TestMiddlewareNever(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := adaptertest.FixedRule("default", 10)
	rule.Cost = func(core.Request) int { return 11 }
	m, err := core.NewMiddleware(l, []core.Rule{rule}, core.MiddlewareConfig{Headers: core.HeadersLegacy})
	if err != nil {
		t.Fatal(err)
	}
	out := m.Handle(clientRequest("a"))
	if got, want := out.Status, http.StatusTooManyRequests; got != want {
		t.Fatalf("status %d, want %d", got, want)
	}
	if got := out.Headers.Get(core.HeaderRetryAfter); got != "" {
		t.Errorf("Retry-After %q for a cost that can never pass, want none", got)
	}
	checkProblem(t, out.Body, http.StatusTooManyRequests)
}

func TestMiddlewareNoIdentity(t *testing.T) {
	global := core.Rule{Name: "global", Limit: core.PerMinute(10), Key: keyfuncs.Static("all")}
	tests := []struct {
		name       string
		rules      []core.Rule
		policy     core.NoIdentityPolicy
		wantStatus int
		wantPolicy string
	}{
		{"next skips the rule", []core.Rule{adaptertest.FixedRule("client", 5), global}, core.NoIdentityNext, 0, `"global";q=10;w=60`},
		{"next skips the rule, whatever its place", []core.Rule{global, adaptertest.FixedRule("client", 5)}, core.NoIdentityNext, 0, `"global";q=10;w=60`},
		{"next skips every rule", []core.Rule{adaptertest.FixedRule("client", 5), adaptertest.FixedRule("client2", 5)}, core.NoIdentityNext, 0, ""},
		{"401", []core.Rule{adaptertest.FixedRule("client", 5), global}, core.NoIdentity401, http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := adaptertest.NewLimiter(t)
			m, err := core.NewMiddleware(l, tt.rules, core.MiddlewareConfig{NoIdentity: tt.policy})
			if err != nil {
				t.Fatal(err)
			}
			out := m.Handle(clientRequest(""))
			if got, want := out.Status, tt.wantStatus; got != want {
				t.Fatalf("status %d, want %d (err %v)", got, want, out.Err)
			}
			if got, want := out.Headers.Get(core.HeaderPolicy), tt.wantPolicy; got != want {
				t.Errorf("RateLimit-Policy %q, want %q", got, want)
			}
			if tt.wantStatus == 0 {
				if out.Err != nil || out.Body != nil {
					t.Errorf("err %v, body %q, want neither", out.Err, out.Body)
				}
				return
			}
			if !errors.Is(out.Err, core.ErrNoIdentity) {
				t.Errorf("err %v, want one wrapping ErrNoIdentity", out.Err)
			}
			if out.Limited() {
				t.Error("Limited() for a request with no identity")
			}
			checkProblem(t, out.Body, tt.wantStatus)
		})
	}
}

func TestMiddlewareNoIdentitySpendsNothing(t *testing.T) {
	// the global rule must be spent once per request, not once per attempt
	l, _ := adaptertest.NewLimiter(t)
	global := core.Rule{Name: "global", Limit: core.PerMinute(10).WithAlgorithm(core.FixedWindow), Key: keyfuncs.Static("all")}
	m, err := core.NewMiddleware(l, []core.Rule{global, adaptertest.FixedRule("client", 5), adaptertest.FixedRule("client2", 5)}, core.MiddlewareConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out := m.Handle(clientRequest(""))
	if got, want := out.Headers.Get(core.HeaderRemaining), "9"; got != want {
		t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
	}
}

func TestMiddlewareError(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := adaptertest.FixedRule("default", 10)
	rule.Cost = func(core.Request) int { return 0 }
	m, err := core.NewMiddleware(l, []core.Rule{rule}, core.MiddlewareConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out := m.Handle(clientRequest("a"))
	if got, want := out.Status, http.StatusInternalServerError; got != want {
		t.Fatalf("status %d, want %d", got, want)
	}
	if !errors.Is(out.Err, core.ErrInvalidCost) {
		t.Errorf("err %v, want one wrapping ErrInvalidCost", out.Err)
	}
	if out.Headers.Len() != 0 {
		t.Errorf("%d header fields on an error, want none", out.Headers.Len())
	}
	checkProblem(t, out.Body, http.StatusInternalServerError)
}

func TestMiddlewareCopiesRules(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rules := []core.Rule{adaptertest.FixedRule("default", 10)}
	m, err := core.NewMiddleware(l, rules, core.MiddlewareConfig{})
	if err != nil {
		t.Fatal(err)
	}
	rules[0].Name = "changed"
	out := m.Handle(clientRequest("a"))
	if got, want := out.Headers.Get(core.HeaderPolicy), `"default";q=10;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
}

func TestNewMiddlewareInvalid(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	ok := []core.Rule{adaptertest.FixedRule("default", 10)}
	tests := []struct {
		name  string
		l     *core.Limiter
		rules []core.Rule
		cfg   core.MiddlewareConfig
	}{
		{"nil limiter", nil, ok, core.MiddlewareConfig{}},
		{"no rules", l, nil, core.MiddlewareConfig{}},
		{"two rules of one name", l, append(ok, ok[0]), core.MiddlewareConfig{}},
		{"rule without key", l, []core.Rule{{Name: "a", Limit: core.PerSecond(1)}}, core.MiddlewareConfig{}},
		{"unknown header style", l, ok, core.MiddlewareConfig{Headers: 9}},
		{"unknown draft", l, ok, core.MiddlewareConfig{Draft: 3}},
		{"unknown no-identity policy", l, ok, core.MiddlewareConfig{NoIdentity: 9}},
		{"fail-closed status 200", l, ok, core.MiddlewareConfig{FailClosedStatus: 200}},
		{"fail-closed status 600", l, ok, core.MiddlewareConfig{FailClosedStatus: 600}},
		{"non-ASCII name with IETF fields", l, []core.Rule{adaptertest.FixedRule("café", 1)}, core.MiddlewareConfig{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := core.NewMiddleware(tt.l, tt.rules, tt.cfg); err == nil {
				t.Error("NewMiddleware succeeded, want an error")
			}
		})
	}
	if _, err := core.NewMiddleware(l, []core.Rule{adaptertest.FixedRule("café", 1)}, core.MiddlewareConfig{Headers: core.HeadersLegacy}); err != nil {
		t.Errorf("non-ASCII name with legacy fields only: %v", err)
	}
}

func TestMiddlewareHandleAllocs(t *testing.T) {
	l, clock := adaptertest.NewLimiter(t)
	rules := []core.Rule{{Name: "default", Limit: core.PerSecond(1 << 20), Key: adaptertest.ClientKey()}}
	m, err := core.NewMiddleware(l, rules, core.MiddlewareConfig{})
	if err != nil {
		t.Fatal(err)
	}
	req := clientRequest("a")
	check := testing.AllocsPerRun(200, func() {
		if _, err := l.Check(req.Context(), req, rules); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Millisecond)
	})
	handle := testing.AllocsPerRun(200, func() {
		if out := m.Handle(req); !out.Proceed() {
			t.Fatal(out.Err)
		}
		clock.Advance(time.Millisecond)
	})
	t.Logf("Limiter.Check: %v allocs; Middleware.Handle: %v allocs", check, handle)
	if handle > check {
		t.Errorf("Handle allocates %v, more than Check's %v", handle, check)
	}
}
