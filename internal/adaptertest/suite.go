package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
)

// Run proves the adapter that h builds against the behaviour every adapter
// shares, one subtest each: the header fields and the 429 answer, the
// header styles, skipping, stacked per-route middlewares, the denied and
// error handlers, requests without an identity, a denial by a later
// identity's rule (which spends nothing under the earlier's, on a real
// redis-server and a Cluster), the request's context
// reaching the store, the answers to a failing store, to a misconfigured
// rule and to a request that can never be allowed, the constructors'
// errors, and the charge of the cost a handler reports, streamed answers
// cut short included.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		test func(*testing.T, Harness)
	}{
		{"HeadersAndDenial", testHeadersAndDenial},
		{"HeaderStyles", testHeaderStyles},
		{"Skip", testSkip},
		{"PerRouteStacking", testPerRouteStacking},
		{"CustomHandlers", testCustomHandlers},
		{"NoIdentity", testNoIdentity},
		{"NoIdentityNextRule", testNoIdentityNextRule},
		{"ContextReachesStore", testContextReachesStore},
		{"StoreFailure", testStoreFailure},
		{"StoreFailureErrorHandler", testStoreFailureErrorHandler},
		{"Misconfigured", testMisconfigured},
		{"NeverAllowed", testNeverAllowed},
		{"NewInvalid", testNewInvalid},
		{"RuleSet", testRuleSet},
		{"CountOnly", testCountOnly},
		{"CountOnlyConcurrent", testCountOnlyConcurrent},
		{"CountOnlyPanic", testCountOnlyPanic},
		{"CountOnlyHeaders", testCountOnlyHeaders},
		{"DeniedSpendsNothing", testDeniedSpendsNothing},
		{"Charged", testCharged},
		{"ChargedPanic", testChargedPanic},
		{"ChargedStream", testChargedStream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.test(t, h) })
	}
}

// build returns the app that h makes, failing the test on an error.
func build(t *testing.T, h Harness, l *core.Limiter, rules []core.Rule, s Setup) App {
	t.Helper()
	app, err := h.New(t, l, rules, s)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// checkFields reports each field of want whose value in h differs: ""
// wants the field absent.
func checkFields(t *testing.T, h http.Header, want map[string]string) {
	t.Helper()
	for name, v := range want {
		if got := h.Values(name); (v == "" && len(got) != 0) || (v != "" && (len(got) != 1 || got[0] != v)) {
			t.Errorf("%s: %q, want %q", name, got, v)
		}
	}
}

// checkProblem reports unless r is a problem+json answer of status, and
// returns its detail.
func checkProblem(t *testing.T, r Response, status int) string {
	t.Helper()
	var p struct {
		Type, Title, Detail string
		Status              int
	}
	if r.Status != status {
		t.Errorf("status %d, want %d", r.Status, status)
	}
	if got, want := r.Header.Get("Content-Type"), adapter.ProblemContentType; got != want {
		t.Errorf("Content-Type %q, want %q", got, want)
	}
	err := json.Unmarshal([]byte(r.Body), &p)
	if err != nil || p.Type != "about:blank" || p.Status != status || p.Title != http.StatusText(status) || p.Detail == "" {
		t.Errorf("body %s (%v), want a %d problem", r.Body, err, status)
	}
	return p.Detail
}

func testHeadersAndDenial(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	app := build(t, h, l, []core.Rule{FixedRule("default", 100)}, Setup{})
	for i := range 57 {
		if r := app.Get("/", "a"); r.Status != http.StatusOK {
			t.Fatalf("request %d: status %d", i+1, r.Status)
		}
	}
	r := app.Get("/", "a")
	if r.Status != http.StatusOK || r.Body != "ok" {
		t.Fatalf("58th request: %d %q, want 200 \"ok\"", r.Status, r.Body)
	}
	checkFields(t, r.Header, map[string]string{
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "42",
		"X-RateLimit-Reset":     "30",
		"RateLimit-Policy":      `"default";q=100;w=60`,
		"RateLimit":             `"default";r=42;t=30`,
		"Retry-After":           "",
	})
	for range 42 {
		app.Get("/", "a")
	}
	r = app.Get("/", "a")
	checkProblem(t, r, http.StatusTooManyRequests)
	checkFields(t, r.Header, map[string]string{
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "30",
		"RateLimit-Policy":      `"default";q=100;w=60`,
		"RateLimit":             `"default";r=0;t=30`,
		"Retry-After":           "30",
	})
}

func testHeaderStyles(t *testing.T, h Harness) {
	tests := []struct {
		style adapter.HeaderStyle
		want  map[string]string
	}{
		{adapter.HeadersBoth, map[string]string{"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "9", "RateLimit-Policy": `"default";q=10;w=60`, "RateLimit": `"default";r=9;t=30`}},
		{adapter.HeadersLegacy, map[string]string{"X-RateLimit-Limit": "10", "X-RateLimit-Reset": "30", "RateLimit": "", "RateLimit-Policy": ""}},
		{adapter.HeadersIETF, map[string]string{"X-RateLimit-Limit": "", "X-RateLimit-Reset": "", "RateLimit": `"default";r=9;t=30`}},
		{adapter.HeadersNone, map[string]string{"X-RateLimit-Limit": "", "X-RateLimit-Remaining": "", "RateLimit": "", "RateLimit-Policy": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.style.String(), func(t *testing.T) {
			l, _ := NewLimiter(t)
			s := Setup{Config: adapter.Config{Headers: tt.style, Draft: adapter.IETFDraft10}}
			app := build(t, h, l, []core.Rule{FixedRule("default", 10)}, s)
			checkFields(t, app.Get("/", "a").Header, tt.want)
			// Retry-After is written whatever the style
			checkFields(t, app.Get("/", "b").Header, map[string]string{"Retry-After": ""})
			for range 9 {
				app.Get("/", "a")
			}
			checkFields(t, app.Get("/", "a").Header, map[string]string{"Retry-After": "30"})
		})
	}
}

func testSkip(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	app := build(t, h, l, []core.Rule{FixedRule("default", 1)}, Setup{Skip: "/healthz"})
	for range 3 {
		r := app.Get("/healthz", "a")
		if r.Status != http.StatusOK || r.Body != "ok" || r.Header.Get("X-RateLimit-Limit") != "" || r.Header.Get("RateLimit") != "" {
			t.Fatalf("skipped request: %d %q, headers %v", r.Status, r.Body, r.Header)
		}
	}
	if got, want := app.Get("/", "a").Header.Get("X-RateLimit-Remaining"), "0"; got != want {
		t.Errorf("first limited request: remaining %q, want %q (skipped requests spent nothing)", got, want)
	}
	if got, want := app.Get("/", "a").Status, http.StatusTooManyRequests; got != want {
		t.Errorf("second limited request: status %d, want %d", got, want)
	}
}

// A global per-client limit, a per-route limit keyed by the route pattern
// and a login limit on one route: they stack, and the response describes
// the rules of all that applied.
func testPerRouteStacking(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	var mu sync.Mutex
	var routes []string
	perRoute := keyfuncs.Join(keyfuncs.Route(), ClientKey())
	users := FixedRule("users", 2)
	users.Key = func(r core.Request) (string, error) {
		mu.Lock()
		routes = append(routes, r.Route())
		mu.Unlock()
		return perRoute(r)
	}
	app := h.Routes(t, l, []core.Rule{FixedRule("global", 100)}, []core.Rule{users}, []core.Rule{FixedRule("login", 2)})

	// three IDs, one route: one limit of 2, the more restrictive rule, which
	// drives X-RateLimit-*
	for i, want := range []int{200, 200, 429} {
		r := app.Get(fmt.Sprintf("/users/%d", i+1), "a")
		if r.Status != want {
			t.Fatalf("request %d to /users/<id>: status %d, want %d", i+1, r.Status, want)
		}
		checkFields(t, r.Header, map[string]string{"X-RateLimit-Limit": "2", "RateLimit-Policy": `"global";q=100;w=60, "users";q=2;w=60`})
	}
	if got, want := fmt.Sprint(routes), fmt.Sprint([]string{h.Pattern, h.Pattern, h.Pattern}); got != want {
		t.Errorf("routes the key function read: %s, want %s", got, want)
	}
	for i, want := range []int{200, 200, 429} {
		if r := app(NewRequest(http.MethodPost, "/login", "a")); r.Status != want {
			t.Fatalf("login %d: status %d, want %d", i+1, r.Status, want)
		}
	}
	// the global limit counted all six; the other routes are under it alone
	r := app.Get("/", "a")
	if r.Status != http.StatusOK || r.Body != "ok" {
		t.Fatalf("GET /: %d %q", r.Status, r.Body)
	}
	checkFields(t, r.Header, map[string]string{"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "93", "RateLimit-Policy": `"global";q=100;w=60`})
	// another client has its own per-route quota
	if got, want := app.Get("/users/1", "b").Status, http.StatusOK; got != want {
		t.Errorf("other client: status %d, want %d", got, want)
	}
}

// The denied handler answers a limited request, the error handler a
// request without an identity under NoIdentity401; each sees the fields
// already set, and the chain stops after it.
func testCustomHandlers(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	var gotErr error
	s := Setup{
		Config: adapter.Config{NoIdentity: adapter.NoIdentity401},
		Denied: func(d core.Decision, retryAfter string) Answer {
			res := d.Results[d.Limiting]
			return Answer{http.StatusTeapot, "slow down: " + res.Rule + ", retry after " + retryAfter}
		},
		Error: func(status int, err error, _ string) Answer {
			gotErr = err
			if status != http.StatusUnauthorized {
				t.Errorf("error handler: status %d, want 401", status)
			}
			return Answer{http.StatusForbidden, "who are you?"}
		},
	}
	app := build(t, h, l, []core.Rule{FixedRule("default", 1)}, s)
	if r := app.Get("/", "a"); r.Status != http.StatusOK || r.Body != "ok" {
		t.Fatalf("first request: %d %q, want 200 \"ok\"", r.Status, r.Body)
	}
	r := app.Get("/", "a")
	if got, want := fmt.Sprint(r.Status, " ", r.Body), "418 slow down: default, retry after 30"; got != want {
		t.Errorf("denied: %q, want %q", got, want)
	}
	checkFields(t, r.Header, map[string]string{"X-RateLimit-Remaining": "0", "Retry-After": "30"})
	r = app.Get("/", "")
	if got, want := fmt.Sprint(r.Status, " ", r.Body), "403 who are you?"; got != want {
		t.Errorf("no identity: %q, want %q", got, want)
	}
	if !errors.Is(gotErr, core.ErrNoIdentity) {
		t.Errorf("error handler got %v, want an error wrapping ErrNoIdentity", gotErr)
	}
}

// A request without an identity goes on unlimited under NoIdentityNext,
// and is answered 401 under NoIdentity401; neither spends anything.
func testNoIdentity(t *testing.T, h Harness) {
	tests := []struct {
		policy adapter.NoIdentityPolicy
		want   int
	}{
		{adapter.NoIdentityNext, http.StatusOK},
		{adapter.NoIdentity401, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		l, _ := NewLimiter(t)
		s := Setup{Config: adapter.Config{NoIdentity: tt.policy}}
		app := build(t, h, l, []core.Rule{FixedRule("default", 1)}, s)
		for range 2 {
			r := app.Get("/", "")
			if tt.want == http.StatusOK && (r.Status != tt.want || r.Body != "ok") {
				t.Errorf("policy %d: %d %q, want 200 \"ok\"", tt.policy, r.Status, r.Body)
			}
			if tt.want != http.StatusOK {
				checkProblem(t, r, tt.want)
			}
			checkFields(t, r.Header, map[string]string{"X-RateLimit-Limit": "", "Retry-After": ""})
		}
		if got, want := app.Get("/", "a").Header.Get("X-RateLimit-Remaining"), "0"; got != want {
			t.Errorf("policy %d: first identified request: remaining %q, want %q", tt.policy, got, want)
		}
	}
}

// Under NoIdentityNext a rule that finds no identity is skipped, and the
// middleware's other rules still apply.
func testNoIdentityNextRule(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	all := FixedRule("all", 2)
	all.Key = keyfuncs.Static("all")
	app := build(t, h, l, []core.Rule{FixedRule("user", 1), all}, Setup{})
	for i, want := range []int{200, 200, 429} {
		r := app.Get("/", "")
		if r.Status != want {
			t.Fatalf("anonymous request %d: status %d, want %d", i+1, r.Status, want)
		}
		checkFields(t, r.Header, map[string]string{"X-RateLimit-Limit": "2", "RateLimit-Policy": `"all";q=2;w=60`})
	}
}

func testContextReachesStore(t *testing.T, h Harness) {
	store := &ContextStore{Store: NewMemoryStore(t, NewClock())}
	l := NewLimiterOver(t, store)
	app := build(t, h, l, []core.Rule{FixedRule("default", 10)}, Setup{})
	r := NewRequest(http.MethodGet, "/", "a")
	r = r.WithContext(context.WithValue(r.Context(), ContextKey{}, "request"))
	if resp := app(r); resp.Status != http.StatusOK {
		t.Fatalf("status %d", resp.Status)
	}
	if got, want := store.Seen(), "request"; got != want {
		t.Errorf("store saw context value %v, want %v", got, want)
	}
}

// Each failure policy of the Limiter, as the middleware answers it when
// the store fails.
func testStoreFailure(t *testing.T, h Harness) {
	tests := []struct {
		name   string
		policy core.FailurePolicy
		status int    // WithFailClosedStatus
		want   [2]int // statuses of two requests under a limit of 1
		fields bool   // whether X-RateLimit-* is set
	}{
		{"local", core.FailLocal, 0, [2]int{200, 429}, true},
		{"open", core.FailOpen, 0, [2]int{200, 200}, true},
		{"closed", core.FailClosed, 0, [2]int{503, 503}, false},
		{"closed, status chosen", core.FailClosed, http.StatusTooManyRequests, [2]int{429, 429}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLimiterOver(t, FailingStore{}, core.WithFailurePolicy(tt.policy))
			s := Setup{Config: adapter.Config{FailClosedStatus: tt.status}}
			app := build(t, h, l, []core.Rule{FixedRule("default", 1)}, s)
			for i, want := range tt.want {
				r := app.Get("/", "a")
				if r.Status != want {
					t.Fatalf("request %d: status %d, want %d", i+1, r.Status, want)
				}
				if got := r.Header.Get("X-RateLimit-Limit") != ""; got != tt.fields {
					t.Errorf("request %d: X-RateLimit-Limit set %v, want %v", i+1, got, tt.fields)
				}
				if got, want := r.Header.Get("Retry-After") != "", want != 200; got != want {
					t.Errorf("request %d: Retry-After %q, want one: %v", i+1, r.Header.Get("Retry-After"), want)
				}
				if want != 200 {
					checkProblem(t, r, want)
				}
			}
		})
	}
}

func testStoreFailureErrorHandler(t *testing.T, h Harness) {
	l := NewLimiterOver(t, FailingStore{}, core.WithFailurePolicy(core.FailClosed))
	var gotErr error
	var retryAfter string
	s := Setup{Error: func(status int, err error, ra string) Answer {
		gotErr, retryAfter = err, ra
		if status != http.StatusServiceUnavailable {
			t.Errorf("error handler: status %d, want 503", status)
		}
		return Answer{http.StatusBadGateway, "down"}
	}}
	app := build(t, h, l, []core.Rule{FixedRule("default", 10)}, s)
	r := app.Get("/", "a")
	if got, want := fmt.Sprint(r.Status, " ", r.Body), "502 down"; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	if retryAfter == "" || r.Header.Get("Retry-After") != retryAfter {
		t.Errorf("Retry-After %q when the error handler ran, %q in the response; want one, the same", retryAfter, r.Header.Get("Retry-After"))
	}
	if !errors.Is(gotErr, core.ErrUnavailable) || !errors.Is(gotErr, ErrStoreDown) {
		t.Errorf("error handler got %v, want one wrapping ErrUnavailable and the store's error", gotErr)
	}
}

// A rule whose cost function returns 0 is an error of the request: 500 by
// default, the error handler's answer with one.
func testMisconfigured(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	rule := FixedRule("default", 10)
	rule.Cost = func(core.Request) int { return 0 }
	r := build(t, h, l, []core.Rule{rule}, Setup{}).Get("/", "a")
	checkProblem(t, r, http.StatusInternalServerError)
	checkFields(t, r.Header, map[string]string{"X-RateLimit-Limit": "", "Retry-After": ""})

	var gotErr error
	app := build(t, h, l, []core.Rule{rule}, Setup{Error: func(status int, err error, _ string) Answer {
		gotErr = err
		if status != http.StatusInternalServerError {
			t.Errorf("error handler: status %d, want 500", status)
		}
		return Answer{http.StatusServiceUnavailable, "misconfigured"}
	}})
	if r := app.Get("/", "a"); r.Status != http.StatusServiceUnavailable || r.Body != "misconfigured" {
		t.Errorf("with an error handler: %d %q, want 503 \"misconfigured\"", r.Status, r.Body)
	}
	if !errors.Is(gotErr, core.ErrInvalidCost) {
		t.Errorf("error handler got %v, want an error wrapping ErrInvalidCost", gotErr)
	}
}

// A request that costs more than a limit's capacity is denied without a
// Retry-After: no wait would help.
func testNeverAllowed(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	rule := FixedRule("default", 2)
	rule.Cost = func(core.Request) int { return 3 }
	r := build(t, h, l, []core.Rule{rule}, Setup{}).Get("/", "a")
	if detail := checkProblem(t, r, http.StatusTooManyRequests); !strings.Contains(detail, "never") {
		t.Errorf("detail %q, want one saying the request will never be allowed", detail)
	}
	checkFields(t, r.Header, map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "2", "Retry-After": ""})
}

func testNewInvalid(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	rules := []core.Rule{FixedRule("default", 1)}
	tests := []struct {
		name  string
		l     *core.Limiter
		rules []core.Rule
		cfg   adapter.Config
	}{
		{"nil limiter", nil, rules, adapter.Config{}},
		{"no rules", l, nil, adapter.Config{}},
		{"invalid rule", l, []core.Rule{{Name: "default", Limit: core.PerMinute(1)}}, adapter.Config{}},
		{"bad fail-closed status", l, rules, adapter.Config{FailClosedStatus: 200}},
		{"bad header style", l, rules, adapter.Config{Headers: 7}},
		{"bad draft", l, rules, adapter.Config{Draft: 2}},
		{"bad no-identity policy", l, rules, adapter.Config{NoIdentity: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := h.New(t, tt.l, tt.rules, Setup{Config: tt.cfg}); err == nil || !strings.HasPrefix(err.Error(), h.Name+": ") {
				t.Errorf("New: %v, want an error that names %s", err, h.Name)
			}
			defer func() {
				if recover() == nil {
					t.Error("MustNew did not panic")
				}
			}()
			_, _ = h.New(t, tt.l, tt.rules, Setup{Config: tt.cfg, Must: true})
		})
	}
}

// NilOption is the name under which [RejectsOptions] and
// [InFlightRejectsOptions] take a nil option.
const NilOption = "nil option"

// RejectsOptions checks that an adapter rejects each of opts: a nil
// option (named [NilOption]), and options given a nil function or meant
// for another middleware, each named as its constructor is, such as
// "WithSkip". The adapter's constructor fn, passed as newFn, returns an
// error that starts with fn and names the option, and its MustNew panics.
func RejectsOptions[O, M any](t *testing.T, fn string,
	newFn func(*core.Limiter, []core.Rule, ...O) (M, error),
	mustNew func(*core.Limiter, []core.Rule, ...O) M,
	opts map[string]O,
) {
	l, _ := NewLimiter(t)
	rules := []core.Rule{FixedRule("default", 1)}
	for name, opt := range opts {
		t.Run(name, func(t *testing.T) {
			_, err := newFn(l, rules, opt)
			checkRejected(t, fn, name, err)
			defer func() {
				if recover() == nil {
					t.Error("MustNew did not panic")
				}
			}()
			mustNew(l, rules, opt)
		})
	}
}

// checkRejected reports unless err is an error of constructor fn that
// names the option name.
func checkRejected(t *testing.T, fn, name string, err error) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), fn+": ") || !strings.Contains(err.Error(), name) {
		t.Errorf("%v, want an error that starts %q and names %s", err, fn+": ", name)
	}
}
