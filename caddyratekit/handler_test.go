package caddyratekit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/ratekit/ratekit/caddyratekit"
	"github.com/ratekit/ratekit/core"
)

func TestLimitHeadersAndPlaceholders(t *testing.T) {
	_, url := redisURL(t)
	h := fromJSON(t, handlerJSON(url, `{"name":"default","limit":3,"period":60000000000}`, ""))
	provision(t, h)

	var as []answer
	for range 4 {
		as = append(as, get(t, h, "/", "203.0.113.7"))
	}
	if got, want := statuses(as), "200 200 200 429"; got != want {
		t.Fatalf("statuses %s, want %s", got, want)
	}
	for i, a := range as[:3] {
		if !a.next || a.err != nil || a.body != "ok" {
			t.Errorf("request %d: next %v, err %v, body %q: want the next handler's answer", i, a.next, a.err, a.body)
		}
		if got, want := a.header.Get("X-Ratelimit-Remaining"), itoa(2-i); got != want {
			t.Errorf("request %d: X-RateLimit-Remaining %q, want %q", i, got, want)
		}
		if got, want := a.placeholder(caddyratekit.PlaceholderRemaining), itoa(2-i); got != want {
			t.Errorf("request %d: {%s} %q, want %q", i, caddyratekit.PlaceholderRemaining, got, want)
		}
		if got := a.placeholder(caddyratekit.PlaceholderAllowed); got != "true" {
			t.Errorf("request %d: {%s} %q, want true", i, caddyratekit.PlaceholderAllowed, got)
		}
		if got := a.placeholder(caddyratekit.PlaceholderRetryAfter); got != "0" {
			t.Errorf("request %d: {%s} %q, want 0", i, caddyratekit.PlaceholderRetryAfter, got)
		}
	}
	denied := as[3]
	if denied.next {
		t.Error("the denied request reached the next handler")
	}
	if !errors.Is(denied.err, caddyratekit.ErrLimited) {
		t.Errorf("denial's error %v, want one wrapping ErrLimited", denied.err)
	}
	for name, want := range map[string]string{
		"Retry-After":           "20", // GCRA 3/min: one unit every 20s
		"X-Ratelimit-Limit":     "3",
		"X-Ratelimit-Remaining": "0",
		"X-Ratelimit-Reset":     "60",
		"Ratelimit-Policy":      `"default";q=3;w=60`,
		"Ratelimit":             `"default";r=0;t=60`,
	} {
		if got := denied.header.Get(name); got != want {
			t.Errorf("denial: %s %q, want %q", name, got, want)
		}
	}
	for name, want := range map[string]string{
		caddyratekit.PlaceholderAllowed:    "false",
		caddyratekit.PlaceholderRetryAfter: "20",
		caddyratekit.PlaceholderRemaining:  "0",
		caddyratekit.PlaceholderLimit:      "3",
		caddyratekit.PlaceholderReset:      "60",
		caddyratekit.PlaceholderRule:       "default",
		caddyratekit.PlaceholderDegraded:   "false",
	} {
		if got := denied.placeholder(name); got != want {
			t.Errorf("denial: {%s} %q, want %q", name, got, want)
		}
	}
	// another client has a limit of its own
	if a := get(t, h, "/", "203.0.113.8"); a.status != http.StatusOK {
		t.Errorf("another client: %d, want 200", a.status)
	}
}

// Every algorithm allows exactly its limit, then denies.
func TestAlgorithms(t *testing.T) {
	for _, alg := range []string{"gcra", "fixed", "sliding-log", "sliding-counter"} {
		t.Run(alg, func(t *testing.T) {
			_, url := redisURL(t)
			h := fromJSON(t, handlerJSON(url, `{"name":"r","limit":5,"period":3600000000000,"algorithm":"`+alg+`"}`, ""))
			provision(t, h)
			allowed := 0
			for range 8 {
				if a := get(t, h, "/", "198.51.100.1"); a.status == http.StatusOK {
					allowed++
				}
			}
			if allowed != 5 {
				t.Errorf("%d of 8 allowed, want 5", allowed)
			}
		})
	}
}

// Burst sets the GCRA bucket's size: 2 at once of a
// limit of 10 per minute with burst 2.
func TestBurst(t *testing.T) {
	_, url := redisURL(t)
	h := fromJSON(t, handlerJSON(url, `{"name":"r","limit":10,"period":60000000000,"burst":2}`, ""))
	provision(t, h)
	var as []answer
	for range 3 {
		as = append(as, get(t, h, "/", "198.51.100.1"))
	}
	if got, want := statuses(as), "200 200 429"; got != want {
		t.Errorf("statuses %s, want %s", got, want)
	}
	if got, want := as[2].header.Get("Retry-After"), "6"; got != want {
		t.Errorf("Retry-After %q, want %q (one unit every 6s)", got, want)
	}
}

// Rules of one key are decided together; a denial by a rule of another
// key gives back what the first spent, so a denied request spends
// nothing anywhere.
func TestRulesAllOrNothing(t *testing.T) {
	mr, url := redisURL(t)
	h := fromJSON(t, handlerJSON(url, `
		{"name":"per-ip","limit":10,"period":60000000000,"algorithm":"fixed"},
		{"name":"per-tenant","limit":2,"period":60000000000,"algorithm":"fixed","keys":[{"source":"header","header":"X-Tenant"}]}`, ""))
	provision(t, h)
	req := func() answer {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Tenant", "acme")
		return serve(t, h, r, "198.51.100.1")
	}
	var as []answer
	for range 5 {
		as = append(as, req())
	}
	if got, want := statuses(as), "200 200 429 429 429"; got != want {
		t.Fatalf("statuses %s, want %s", got, want)
	}
	// the per-ip counter holds the two allowed requests only
	if got, err := mr.Get("ratekit:per-ip:{ip:198.51.100.1}"); err != nil || got != "2" {
		t.Errorf("per-ip counter %q (%v), want 2: the denied requests' units were not given back", got, err)
	}
	if got := as[4].placeholder(caddyratekit.PlaceholderRule); got != "per-tenant" {
		t.Errorf("{%s} %q, want per-tenant", caddyratekit.PlaceholderRule, got)
	}
	// both rules' fields, in one IETF list
	if got, want := as[1].header.Get("Ratelimit-Policy"), `"per-ip";q=10;w=60, "per-tenant";q=2;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}

	// two limits of one key, 3/min and 5/h: one script, all or nothing
	mr2, url2 := redisURL(t)
	h2 := fromJSON(t, handlerJSON(url2, `
		{"name":"minute","limit":3,"period":60000000000,"algorithm":"fixed"},
		{"name":"hour","limit":5,"period":3600000000000,"algorithm":"fixed"}`, ""))
	provision(t, h2)
	for range 4 {
		get(t, h2, "/", "198.51.100.2")
	}
	if got, _ := mr2.Get("ratekit:hour:{ip:198.51.100.2}"); got != "3" {
		t.Errorf("hour counter %q after 3 allowed and 1 denied by the minute rule, want 3", got)
	}
}

func TestRuleMatchers(t *testing.T) {
	_, url := redisURL(t)
	h := fromCaddyfile(t, `ratekit {
		redis `+url+`
		timeout 1s
		rule default 100 1m
		rule strict 1 1m {
			match {
				path /strict
			}
		}
	}`)
	provision(t, h)
	if a := get(t, h, "/strict", "198.51.100.1"); a.status != http.StatusOK {
		t.Fatalf("first /strict: %d", a.status)
	}
	if a := get(t, h, "/strict", "198.51.100.1"); a.status != http.StatusTooManyRequests || a.placeholder(caddyratekit.PlaceholderRule) != "strict" {
		t.Errorf("second /strict: %d, rule %q; want 429 by strict", a.status, a.placeholder(caddyratekit.PlaceholderRule))
	}
	for range 3 {
		if a := get(t, h, "/other", "198.51.100.1"); a.status != http.StatusOK {
			t.Errorf("/other: %d, want 200: the strict rule applies to /strict only", a.status)
		}
	}
	a := get(t, h, "/other", "198.51.100.1")
	if got := a.header.Get("Ratelimit-Policy"); got != `"default";q=100;w=60` {
		t.Errorf("/other's RateLimit-Policy %q: want the default rule only", got)
	}
}

func TestNoIdentity(t *testing.T) {
	_, url := redisURL(t)
	rules := `{"name":"tenant","limit":1,"period":60000000000,"keys":[{"source":"header","header":"X-Tenant"}]}`
	next := fromJSON(t, handlerJSON(url, rules, ""))
	provision(t, next)
	for range 3 {
		if a := get(t, next, "/", "198.51.100.1"); a.status != http.StatusOK || a.header.Get("X-Ratelimit-Limit") != "" {
			t.Errorf("no X-Tenant under no_identity next: %d, X-RateLimit-Limit %q; want 200, unlimited", a.status, a.header.Get("X-Ratelimit-Limit"))
		}
	}
	strict := fromJSON(t, handlerJSON(url, rules, `"no_identity":"401"`))
	provision(t, strict)
	a := get(t, strict, "/", "198.51.100.1")
	if a.status != http.StatusUnauthorized || a.next || !errors.Is(a.err, core.ErrNoIdentity) {
		t.Errorf("no X-Tenant under no_identity 401: %d, next %v, err %v", a.status, a.next, a.err)
	}
}

// An allowed request reaches the next handler untouched: method, path,
// query, header and body.
func TestRequestUntouched(t *testing.T) {
	_, url := redisURL(t)
	h := fromJSON(t, handlerJSON(url, `{"name":"r","limit":5,"period":60000000000}`, ""))
	provision(t, h)
	r := httptest.NewRequest(http.MethodPost, "/items/7?x=1&y=2", strings.NewReader("the body"))
	r.Header.Set("X-Custom", "kept")
	a := serve(t, h, r, "")
	if a.status != http.StatusOK || a.body != "okthe body" {
		t.Fatalf("%d %q, want 200 with the body echoed", a.status, a.body)
	}
	q := a.request
	if q.Method != http.MethodPost || q.URL.Path != "/items/7" || q.URL.RawQuery != "x=1&y=2" || q.Header.Get("X-Custom") != "kept" {
		t.Errorf("next saw %s %s?%s X-Custom %q", q.Method, q.URL.Path, q.URL.RawQuery, q.Header.Get("X-Custom"))
	}
}

// Fail policies with a Redis that is gone: local keeps limiting,
// each decision degraded; open allows; closed answers 503 with
// Retry-After through the error routes.
func TestFailPolicies(t *testing.T) {
	mr, url := redisURL(t)
	mr.Close() // nobody listens there any more
	rule := `{"name":"r","limit":2,"period":60000000000}`

	local := fromJSON(t, handlerJSON(url, rule, `"timeout":"20ms"`))
	provision(t, local)
	var as []answer
	for range 3 {
		as = append(as, get(t, local, "/", "198.51.100.1"))
	}
	if got, want := statuses(as), "200 200 429"; got != want {
		t.Errorf("fail local: %s, want %s", got, want)
	}
	if got := as[0].placeholder(caddyratekit.PlaceholderDegraded); got != "true" {
		t.Errorf("fail local: {%s} %q, want true", caddyratekit.PlaceholderDegraded, got)
	}

	open := fromJSON(t, handlerJSON(url, rule, `"timeout":"20ms","fail":"open"`))
	provision(t, open)
	for range 3 {
		if a := get(t, open, "/", "198.51.100.1"); a.status != http.StatusOK {
			t.Errorf("fail open: %d, want 200", a.status)
		}
	}

	closed := fromJSON(t, handlerJSON(url, rule, `"timeout":"20ms","fail":"closed","fail_closed_status":429`))
	provision(t, closed)
	a := get(t, closed, "/", "198.51.100.1")
	if a.status != http.StatusTooManyRequests || a.next || !errors.Is(a.err, core.ErrUnavailable) {
		t.Errorf("fail closed: %d, next %v, err %v; want 429 (its fail_closed_status) wrapping ErrUnavailable", a.status, a.next, a.err)
	}
	if a.header.Get("Retry-After") == "" || a.placeholder(caddyratekit.PlaceholderRetryAfter) == "0" {
		t.Errorf("fail closed: Retry-After %q, {%s} %q: want a wait", a.header.Get("Retry-After"), caddyratekit.PlaceholderRetryAfter, a.placeholder(caddyratekit.PlaceholderRetryAfter))
	}
	var he caddyhttp.HandlerError
	if !errors.As(a.err, &he) {
		t.Errorf("fail closed: %T is no caddyhttp.HandlerError", a.err)
	}
}

// Shadow rules never deny, but report.
func TestShadow(t *testing.T) {
	_, url := redisURL(t)
	h := fromJSON(t, handlerJSON(url, `{"name":"r","limit":1,"period":60000000000,"shadow":true}`, ""))
	provision(t, h)
	get(t, h, "/", "198.51.100.1")
	a := get(t, h, "/", "198.51.100.1")
	if a.status != http.StatusOK || !a.next {
		t.Errorf("shadow rule over its limit: %d, want 200", a.status)
	}
	if got := a.header.Get("X-Ratelimit-Remaining"); got != "0" {
		t.Errorf("shadow rule: X-RateLimit-Remaining %q, want 0", got)
	}
}

func TestCost(t *testing.T) {
	_, url := redisURL(t)
	h := fromJSON(t, handlerJSON(url, `{"name":"r","limit":10,"period":60000000000,"cost":4}`, ""))
	provision(t, h)
	var as []answer
	for range 3 {
		as = append(as, get(t, h, "/", "198.51.100.1"))
	}
	if got, want := statuses(as), "200 200 429"; got != want {
		t.Errorf("cost 4 of 10: %s, want %s", got, want)
	}
}

// A reload during an outage keeps each instance's local counts: the
// Limiter is shared by its configuration across the old and the new
// config, so the new one grants no fresh window.
func TestReloadDuringOutageKeepsLocalCounts(t *testing.T) {
	mr, url := redisURL(t)
	mr.Close()
	js := handlerJSON(url, `{"name":"r","limit":2,"period":3600000000000}`, `"timeout":"20ms"`)
	old := fromJSON(t, js)
	if err := tryProvisionNoCleanup(old); err != nil {
		t.Fatal(err)
	}
	var as []answer
	for range 3 {
		as = append(as, get(t, old, "/", "198.51.100.1"))
	}
	// a reload: the new config is provisioned before the old one is
	// cleaned up
	h := fromJSON(t, js)
	provision(t, h)
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		as = append(as, get(t, h, "/", "198.51.100.1"))
	}
	if got, want := statuses(as), "200 200 429 429 429"; got != want {
		t.Errorf("statuses %s, want %s: the reload started a fresh local window", got, want)
	}
}

// The placeholders tell the decision of the last ratekit handler that saw
// the request, and are empty where no rule applied.
func TestPlaceholdersOfChainedHandlers(t *testing.T) {
	_, url := redisURL(t)
	first := fromJSON(t, handlerJSON(url, `{"name":"first","limit":5,"period":60000000000}`, ""))
	second := fromJSON(t, handlerJSON(url, `{"name":"second","limit":10,"period":60000000000,"keys":[{"source":"header","header":"X-Tenant"}]}`, ""))
	provision(t, first)
	provision(t, second)
	chain := func(r *http.Request) answer {
		repl := caddy.NewReplacer()
		w := httptest.NewRecorder()
		r = caddyhttp.PrepareRequest(r, repl, w, nil)
		err := first.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return second.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil }))
		}))
		return answer{err: err, repl: repl, header: w.Header()}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Tenant", "acme")
	a := chain(r)
	if a.err != nil {
		t.Fatal(a.err)
	}
	if got := a.placeholder(caddyratekit.PlaceholderRule) + " " + a.placeholder(caddyratekit.PlaceholderLimit); got != "second 10" {
		t.Errorf("rule and limit %q, want the second handler's: second 10", got)
	}
	// both handlers' fields on the answer
	if got, want := a.header.Get("Ratelimit-Policy"), `"first";q=5;w=60, "second";q=10;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	a = chain(httptest.NewRequest(http.MethodGet, "/", nil)) // no X-Tenant: the second decides nothing
	for name, want := range map[string]string{
		caddyratekit.PlaceholderRule: "", caddyratekit.PlaceholderLimit: "", caddyratekit.PlaceholderRemaining: "",
		caddyratekit.PlaceholderReset: "", caddyratekit.PlaceholderAllowed: "true", caddyratekit.PlaceholderRetryAfter: "0",
	} {
		if got := a.placeholder(name); got != want {
			t.Errorf("no rule applied: {%s} %q, want %q", name, got, want)
		}
	}
}
