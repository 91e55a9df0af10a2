package adapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
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
	return adapter.HTTPRequest(r)
}

func TestMiddlewareHandle(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	m, err := adapter.New(l, []core.Rule{adaptertest.FixedRule("default", 100)}, adapter.Config{})
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
	want := []adapter.Header{
		{Name: adapter.HeaderLimit, Value: "100"},
		{Name: adapter.HeaderRemaining, Value: "42"},
		{Name: adapter.HeaderReset, Value: "30"},
		{Name: adapter.HeaderPolicy, Value: `"default";q=100;w=60`},
		{Name: adapter.HeaderRateLimit, Value: `"default";r=42;t=30`},
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
	checkHeaders(t, out.Headers, []adapter.Header{
		{Name: adapter.HeaderLimit, Value: "100"},
		{Name: adapter.HeaderRemaining, Value: "0"},
		{Name: adapter.HeaderReset, Value: "30"},
		{Name: adapter.HeaderPolicy, Value: `"default";q=100;w=60`},
		{Name: adapter.HeaderRateLimit, Value: `"default";r=0;t=30`},
		{Name: adapter.HeaderRetryAfter, Value: "30"},
	})
	checkProblem(t, out.Body, http.StatusTooManyRequests)

	// another client has its own quota
	if out := m.Handle(clientRequest("b")); !out.Proceed() {
		t.Errorf("other client: status %d, want to proceed", out.Status)
	}
}

func checkHeaders(t *testing.T, h adapter.Headers, want []adapter.Header) {
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

// TestMiddlewareOverFailingStore checks, end to end through a Limiter over a
// store that always fails, the answers that TestMiddlewareFailurePolicies
// checks for the decisions each failure policy promises.
func TestMiddlewareOverFailingStore(t *testing.T) {
	tests := []struct {
		policy        core.FailurePolicy
		wantStatus    int
		wantRemaining string // X-RateLimit-Remaining of the second request
	}{
		{core.FailLocal, 0, "98"}, // counted in process
		{core.FailOpen, 0, "99"},  // nothing counted: the capacity less the cost
		{core.FailClosed, http.StatusServiceUnavailable, ""},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			clock := adaptertest.NewClock() // the local fallback's window stays put
			l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{},
				core.WithFailurePolicy(tt.policy), core.WithClock(clock.Now))
			m, err := adapter.New(l, []core.Rule{adaptertest.FixedRule("default", 100)}, adapter.Config{})
			if err != nil {
				t.Fatal(err)
			}
			m.Handle(clientRequest("a"))
			out := m.Handle(clientRequest("a"))
			if got, want := out.Status, tt.wantStatus; got != want {
				t.Fatalf("status %d, want %d (err %v)", got, want, out.Err)
			}
			if !out.Decision.Degraded() {
				t.Errorf("decision %+v, want it degraded", out.Decision)
			}
			if got, want := out.Headers.Get(adapter.HeaderRemaining), tt.wantRemaining; got != want {
				t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
			}
			if tt.wantStatus == 0 {
				if out.Err != nil || out.Body != nil {
					t.Errorf("err %v, body %q, want neither", out.Err, out.Body)
				}
				return
			}
			if !errors.Is(out.Err, core.ErrUnavailable) || !errors.Is(out.Err, adaptertest.ErrStoreDown) {
				t.Errorf("err %v, want one wrapping ErrUnavailable and the store's error", out.Err)
			}
			if out.Limited() {
				t.Error("Limited() for a store outage")
			}
			if got := out.Headers.Len(); got != 1 || out.Headers.Get(adapter.HeaderRetryAfter) == "" {
				t.Errorf("%d header fields, want Retry-After alone", got)
			}
			checkProblem(t, out.Body, tt.wantStatus)
		})
	}
}

func TestMiddlewareNever(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := adaptertest.FixedRule("default", 10)
	rule.Cost = func(core.Request) int { return 11 }
	m, err := adapter.New(l, []core.Rule{rule}, adapter.Config{Headers: adapter.HeadersLegacy})
	if err != nil {
		t.Fatal(err)
	}
	out := m.Handle(clientRequest("a"))
	if got, want := out.Status, http.StatusTooManyRequests; got != want {
		t.Fatalf("status %d, want %d", got, want)
	}
	if got := out.Headers.Get(adapter.HeaderRetryAfter); got != "" {
		t.Errorf("Retry-After %q for a cost that can never pass, want none", got)
	}
	checkProblem(t, out.Body, http.StatusTooManyRequests)
}

func TestMiddlewareNoIdentity(t *testing.T) {
	global := core.Rule{Name: "global", Limit: core.PerMinute(10), Key: keyfuncs.Static("all")}
	tests := []struct {
		name       string
		rules      []core.Rule
		policy     adapter.NoIdentityPolicy
		wantStatus int
		wantPolicy string
	}{
		{"next skips the rule", []core.Rule{adaptertest.FixedRule("client", 5), global}, adapter.NoIdentityNext, 0, `"global";q=10;w=60`},
		{"next skips the rule, whatever its place", []core.Rule{global, adaptertest.FixedRule("client", 5)}, adapter.NoIdentityNext, 0, `"global";q=10;w=60`},
		{"next skips every rule", []core.Rule{adaptertest.FixedRule("client", 5), adaptertest.FixedRule("client2", 5)}, adapter.NoIdentityNext, 0, ""},
		{"401", []core.Rule{adaptertest.FixedRule("client", 5), global}, adapter.NoIdentity401, http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := adaptertest.NewLimiter(t)
			m, err := adapter.New(l, tt.rules, adapter.Config{NoIdentity: tt.policy})
			if err != nil {
				t.Fatal(err)
			}
			out := m.Handle(clientRequest(""))
			if got, want := out.Status, tt.wantStatus; got != want {
				t.Fatalf("status %d, want %d (err %v)", got, want, out.Err)
			}
			if got, want := out.Headers.Get(adapter.HeaderPolicy), tt.wantPolicy; got != want {
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
	m, err := adapter.New(l, []core.Rule{global, adaptertest.FixedRule("client", 5), adaptertest.FixedRule("client2", 5)}, adapter.Config{})
	if err != nil {
		t.Fatal(err)
	}
	out := m.Handle(clientRequest(""))
	if got, want := out.Headers.Get(adapter.HeaderRemaining), "9"; got != want {
		t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
	}
}

func TestMiddlewareError(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := adaptertest.FixedRule("default", 10)
	rule.Cost = func(core.Request) int { return 0 }
	m, err := adapter.New(l, []core.Rule{rule}, adapter.Config{})
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

// A request whose context ended before the decision is answered 503 with
// the context's error, under every failure policy: the client is gone or
// out of time, and neither the store nor a rule failed.
func TestMiddlewareRequestEnded(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	late, cancelLate := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelLate()
	for _, policy := range []core.FailurePolicy{core.FailLocal, core.FailOpen, core.FailClosed} {
		for _, tc := range []struct {
			ctx  context.Context
			want error
		}{{canceled, context.Canceled}, {late, context.DeadlineExceeded}} {
			l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(policy))
			m, err := adapter.New(l, []core.Rule{adaptertest.FixedRule("default", 100)}, adapter.Config{})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil).WithContext(tc.ctx)
			r.Header.Set(adaptertest.ClientHeader, "a")
			out := m.Handle(adapter.HTTPRequest(r))
			if got, want := out.Status, http.StatusServiceUnavailable; got != want {
				t.Fatalf("%v, %v: status %d, want %d (err %v)", policy, tc.want, got, want, out.Err)
			}
			if !errors.Is(out.Err, tc.want) || errors.Is(out.Err, core.ErrUnavailable) {
				t.Errorf("%v: err %v, want the context's %v alone", policy, out.Err, tc.want)
			}
			if out.Limited() {
				t.Errorf("%v: Limited() for a request that ended", policy)
			}
			checkProblem(t, out.Body, http.StatusServiceUnavailable)
		}
	}
}

func TestMiddlewareCopiesRules(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rules := []core.Rule{adaptertest.FixedRule("default", 10)}
	m, err := adapter.New(l, rules, adapter.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rules[0].Name = "changed"
	out := m.Handle(clientRequest("a"))
	if got, want := out.Headers.Get(adapter.HeaderPolicy), `"default";q=10;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
}

func TestNewInvalid(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	ok := []core.Rule{adaptertest.FixedRule("default", 10)}
	tests := []struct {
		name  string
		l     *core.Limiter
		rules []core.Rule
		cfg   adapter.Config
	}{
		{"nil limiter", nil, ok, adapter.Config{}},
		{"no rules", l, nil, adapter.Config{}},
		{"two rules of one name", l, append(ok, ok[0]), adapter.Config{}},
		{"rule without key", l, []core.Rule{{Name: "a", Limit: core.PerSecond(1)}}, adapter.Config{}},
		{"unknown header style", l, ok, adapter.Config{Headers: 9}},
		{"unknown draft", l, ok, adapter.Config{Draft: 3}},
		{"unknown no-identity policy", l, ok, adapter.Config{NoIdentity: 9}},
		{"fail-closed status 200", l, ok, adapter.Config{FailClosedStatus: 200}},
		{"fail-closed status 600", l, ok, adapter.Config{FailClosedStatus: 600}},
		{"non-ASCII name with IETF fields", l, []core.Rule{adaptertest.FixedRule("café", 1)}, adapter.Config{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := adapter.New(tt.l, tt.rules, tt.cfg); err == nil || !strings.HasPrefix(err.Error(), "adapter.New: ") {
				t.Errorf("New: %v, want an error that names adapter.New", err)
			}
			// an adapter's constructor names itself, and nothing else
			_, _, err := adapter.Build[struct{}]("mylimit.New", tt.l, tt.rules, []adapter.Option[struct{}]{func(s *adapter.Settings[struct{}]) error {
				s.Config = tt.cfg
				return nil
			}})
			if err == nil || !strings.HasPrefix(err.Error(), "mylimit.New: ") || strings.Contains(err.Error(), "adapter.New") {
				t.Errorf("Build: %v, want an error that names mylimit.New alone", err)
			}
		})
	}
	if _, err := adapter.New(l, []core.Rule{adaptertest.FixedRule("café", 1)}, adapter.Config{Headers: adapter.HeadersLegacy}); err != nil {
		t.Errorf("non-ASCII name with legacy fields only: %v", err)
	}
}

func TestMiddlewareHandleAllocs(t *testing.T) {
	l, clock := adaptertest.NewLimiter(t)
	rules := []core.Rule{{Name: "default", Limit: core.PerSecond(1_000_000), Key: adaptertest.ClientKey()}}
	m, err := adapter.New(l, rules, adapter.Config{})
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
	dst := make(http.Header, 8)
	handle := testing.AllocsPerRun(200, func() {
		out := m.Handle(req)
		if !out.Proceed() {
			t.Fatal(out.Err)
		}
		clear(dst)
		out.Headers.SetHTTP(dst)
		clock.Advance(time.Millisecond)
	})
	t.Logf("Limiter.Check: %v allocs; Middleware.Handle and SetHTTP: %v allocs", check, handle)
	// One block per request holds the results and the fields' text: Check
	// allocates the results, SetHTTP nothing more.
	if handle > check {
		t.Errorf("Handle and SetHTTP allocate %v, more than Check's %v", handle, check)
	}
	if dst.Get(adapter.HeaderLimit) != "1000000" {
		t.Errorf("X-RateLimit-Limit %q after SetHTTP", dst.Get(adapter.HeaderLimit))
	}
}

// Each request's header fields keep their values whatever later requests
// write: the text lives in the request's own memory, used once.
func TestMiddlewareHeadersOutliveNextRequest(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: adaptertest.ClientKey()}}
	m, err := adapter.New(l, rules, adapter.Config{})
	if err != nil {
		t.Fatal(err)
	}
	req := clientRequest("a")
	first := m.Handle(req)
	h1, again := make(http.Header), make(http.Header)
	first.Headers.SetHTTP(h1)
	first.Headers.SetHTTP(again) // writing the fields twice gives the same values
	second := m.Handle(req)
	h2 := make(http.Header)
	second.Headers.SetHTTP(h2)
	for _, h := range []http.Header{h1, again} {
		if got := h.Get(adapter.HeaderRemaining); got != "99" {
			t.Errorf("first request's X-RateLimit-Remaining %q after the second, want 99", got)
		}
	}
	if got := h2.Get(adapter.HeaderRemaining); got != "98" {
		t.Errorf("second request's X-RateLimit-Remaining %q, want 98", got)
	}
	if r := first.Decision.Results; len(r) != 1 || r[0].Remaining != 99 {
		t.Errorf("first decision's results %+v after the second request", r)
	}
}
