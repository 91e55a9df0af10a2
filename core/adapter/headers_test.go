package adapter_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
)

func TestNewHeaders(t *testing.T) {
	minute100 := core.Limit{Rate: 100, Period: time.Minute, Algorithm: core.FixedWindow}
	// the example of DESIGN.md: 100 per minute, 42 left, full in 30s
	example := core.Decision{Allowed: true, Limiting: 0, Results: []core.RuleResult{{
		Rule:   "default",
		Result: core.Result{Limit: minute100, Allowed: true, Remaining: 42, ResetAfter: 30 * time.Second},
	}}}
	denied := func(l core.Limit, retry, reset time.Duration) core.Decision {
		return core.Decision{Limiting: 0, Results: []core.RuleResult{{
			Rule:   "default",
			Result: core.Result{Limit: l, RetryAfter: retry, ResetAfter: reset},
		}}}
	}
	two := core.Decision{Allowed: true, Limiting: 1, Results: []core.RuleResult{
		{Rule: "per-second", Result: core.Result{Limit: core.PerSecond(10), Allowed: true, Remaining: 9, ResetAfter: 100 * time.Millisecond}},
		{Rule: "per-hour", Result: core.Result{Limit: core.PerHour(1000).WithAlgorithm(core.FixedWindow), Allowed: true, Remaining: 3, ResetAfter: 1234500 * time.Millisecond}},
	}}
	tests := []struct {
		name  string
		d     core.Decision
		style adapter.HeaderStyle
		want  []adapter.Header
	}{
		{"design example", example, adapter.HeadersBoth, []adapter.Header{
			{Name: "X-Ratelimit-Limit", Value: "100"},
			{Name: "X-Ratelimit-Remaining", Value: "42"},
			{Name: "X-Ratelimit-Reset", Value: "30"},
			{Name: "Ratelimit-Policy", Value: `"default";q=100;w=60`},
			{Name: "Ratelimit", Value: `"default";r=42;t=30`},
		}},
		{"legacy", example, adapter.HeadersLegacy, []adapter.Header{
			{Name: "X-Ratelimit-Limit", Value: "100"},
			{Name: "X-Ratelimit-Remaining", Value: "42"},
			{Name: "X-Ratelimit-Reset", Value: "30"},
		}},
		{"ietf", example, adapter.HeadersIETF, []adapter.Header{
			{Name: "Ratelimit-Policy", Value: `"default";q=100;w=60`},
			{Name: "Ratelimit", Value: `"default";r=42;t=30`},
		}},
		{"none", example, adapter.HeadersNone, nil},
		{"no rule applied", core.Decision{Allowed: true, Limiting: -1}, adapter.HeadersBoth, nil},
		{"denied, retry rounded up", denied(core.PerMinute(10), 5001*time.Millisecond, time.Minute), adapter.HeadersBoth, []adapter.Header{
			{Name: "X-Ratelimit-Limit", Value: "10"},
			{Name: "X-Ratelimit-Remaining", Value: "0"},
			{Name: "X-Ratelimit-Reset", Value: "60"},
			{Name: "Ratelimit-Policy", Value: `"default";q=10;w=60`},
			{Name: "Ratelimit", Value: `"default";r=0;t=60`},
			{Name: "Retry-After", Value: "6"},
		}},
		{"denied, retry under a second is 1", denied(core.PerSecond(10), time.Microsecond, time.Second), adapter.HeadersNone, []adapter.Header{
			{Name: "Retry-After", Value: "1"},
		}},
		{"denied, retry 0 is 1", denied(core.PerSecond(10), 0, 0), adapter.HeadersLegacy, []adapter.Header{
			{Name: "X-Ratelimit-Limit", Value: "10"},
			{Name: "X-Ratelimit-Remaining", Value: "0"},
			{Name: "X-Ratelimit-Reset", Value: "0"},
			{Name: "Retry-After", Value: "1"},
		}},
		{"denied for ever: no Retry-After", denied(core.PerSecond(10), -1, 0), adapter.HeadersLegacy, []adapter.Header{
			{Name: "X-Ratelimit-Limit", Value: "10"},
			{Name: "X-Ratelimit-Remaining", Value: "0"},
			{Name: "X-Ratelimit-Reset", Value: "0"},
		}},
		{"most restrictive drives legacy, every rule in IETF", two, adapter.HeadersBoth, []adapter.Header{
			{Name: "X-Ratelimit-Limit", Value: "1000"},
			{Name: "X-Ratelimit-Remaining", Value: "3"},
			{Name: "X-Ratelimit-Reset", Value: "1235"},
			{Name: "Ratelimit-Policy", Value: `"per-second";q=10;w=1, "per-hour";q=1000;w=3600`},
			{Name: "Ratelimit", Value: `"per-second";r=9;t=1, "per-hour";r=3;t=1235`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := adapter.NewHeaders(tt.d, tt.style, adapter.DefaultIETFDraft)
			if got, want := h.Len(), len(tt.want); got != want {
				t.Errorf("Len() = %d, want %d", got, want)
			}
			for i := range min(h.Len(), len(tt.want)) {
				if got, want := h.At(i), tt.want[i]; got != want {
					t.Errorf("At(%d) = %q, want %q", i, got, want)
				}
			}
		})
	}
}

func TestNewHeadersPolicy(t *testing.T) {
	tests := []struct {
		name  string
		rule  string
		limit core.Limit
		want  string
	}{
		{"gcra, burst = rate", "a", core.PerMinute(100), `"a";q=100;w=60`},
		{"gcra, burst above rate: q is the burst, w its refill", "a", core.PerSecond(10).WithBurst(20), `"a";q=20;w=2`},
		{"gcra, burst below rate", "a", core.PerMinute(100).WithBurst(10), `"a";q=10;w=6`},
		{"fixed window", "a", core.PerHour(5).WithAlgorithm(core.FixedWindow), `"a";q=5;w=3600`},
		{"sliding log", "a", core.PerMinute(7).WithAlgorithm(core.SlidingWindowLog), `"a";q=7;w=60`},
		{"sub-second period rounds up", "a", core.Limit{Rate: 5, Period: 500 * time.Millisecond, Algorithm: core.SlidingWindowCounter}, `"a";q=5;w=1`},
		{"quote and backslash escaped", `a"b\c`, core.PerSecond(1), `"a\"b\\c";q=1;w=1`},
		{"non-ASCII replaced", "café", core.PerSecond(1), `"caf??";q=1;w=1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := core.Decision{Allowed: true, Results: []core.RuleResult{{Rule: tt.rule, Result: core.Result{Limit: tt.limit, Allowed: true}}}}
			h := adapter.NewHeaders(d, adapter.HeadersIETF, adapter.IETFDraft10)
			if got, want := h.Get(adapter.HeaderPolicy), tt.want; got != want {
				t.Errorf("RateLimit-Policy = %s, want %s", got, want)
			}
		})
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{-1, 1}, {0, 1}, {1, 1}, {time.Second, 1}, {time.Second + 1, 2}, {90 * time.Second, 90},
	}
	for _, tt := range tests {
		if got := adapter.RetryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestHeadersSetHTTP(t *testing.T) {
	d := core.Decision{Limiting: 0, Results: []core.RuleResult{{
		Rule:   "default",
		Result: core.Result{Limit: core.PerMinute(100), RetryAfter: 30 * time.Second, ResetAfter: 30 * time.Second},
	}}}
	h := adapter.NewHeaders(d, adapter.HeadersBoth, 0)
	dst := http.Header{"X-Ratelimit-Limit": {"stale", "values"}, "Content-Type": {"text/plain"}}
	h.SetHTTP(dst)
	want := map[string]string{
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "30",
		"RateLimit-Policy":      `"default";q=100;w=60`,
		"RateLimit":             `"default";r=0;t=30`,
		"Retry-After":           "30",
		"Content-Type":          "text/plain",
	}
	for name, v := range want {
		if got := dst.Values(name); len(got) != 1 || got[0] != v {
			t.Errorf("%s: %q, want [%q]", name, got, v)
		}
	}
	// Add must not write into another field's value
	dst.Add("X-RateLimit-Limit", "x")
	if got, want := dst.Get("X-RateLimit-Remaining"), "0"; got != want {
		t.Errorf("after Add, X-RateLimit-Remaining = %q, want %q", got, want)
	}
}

func TestHeadersAllocs(t *testing.T) {
	d := core.Decision{Allowed: true, Limiting: 1, Results: []core.RuleResult{
		{Rule: "per-second", Result: core.Result{Limit: core.PerSecond(10), Allowed: true, Remaining: 9}},
		{Rule: "per-hour", Result: core.Result{Limit: core.PerHour(1000), Allowed: true, Remaining: 3}},
	}}
	if got := testing.AllocsPerRun(100, func() { _ = adapter.NewHeaders(d, adapter.HeadersBoth, 0) }); got != 0 {
		t.Errorf("NewHeaders: %v allocations, want 0", got)
	}
	h := adapter.NewHeaders(d, adapter.HeadersBoth, 0)
	dst := make(http.Header, 8)
	if got := testing.AllocsPerRun(100, func() { clear(dst); h.SetHTTP(dst) }); got != 1 {
		t.Errorf("SetHTTP: %v allocations, want 1", got)
	}
	m := mapHeader{}
	if got := testing.AllocsPerRun(100, func() { clear(m); h.Set(m) }); got != 1 {
		t.Errorf("Set: %v allocations, want 1", got)
	}
}

// Values set in a header outlive the Headers they came from, however much
// text there is.
func TestHeadersSetOutlives(t *testing.T) {
	for _, rules := range []int{1, 12} {
		d := core.Decision{Allowed: true, Limiting: 0}
		for i := range rules {
			d.Results = append(d.Results, core.RuleResult{
				Rule:   fmt.Sprintf("rule-with-a-long-name-%d", i),
				Result: core.Result{Limit: core.PerHour(1000 + i), Allowed: true, Remaining: 999},
			})
		}
		h := adapter.NewHeaders(d, adapter.HeadersBoth, 0)
		want := h.Get(adapter.HeaderPolicy)
		if got := strings.Count(want, "rule-with-a-long-name-"); got != rules {
			t.Fatalf("%d rules: policy %q lists %d", rules, want, got)
		}
		dst, m := http.Header{}, mapHeader{}
		h.SetHTTP(dst)
		h.Set(m)
		h = adapter.NewHeaders(core.Decision{Limiting: 0, Results: []core.RuleResult{{Rule: "x", Result: core.Result{Limit: core.PerSecond(1), RetryAfter: time.Second}}}}, adapter.HeadersBoth, 0)
		if got := dst.Get("RateLimit-Policy"); got != want {
			t.Errorf("%d rules: SetHTTP: policy %q after the Headers changed, want %q", rules, got, want)
		}
		if got := m[adapter.HeaderPolicy]; got != want {
			t.Errorf("%d rules: Set: policy %q after the Headers changed, want %q", rules, got, want)
		}
		if got, want := dst.Get("X-RateLimit-Remaining"), "999"; got != want {
			t.Errorf("%d rules: remaining %q, want %q", rules, got, want)
		}
	}
}

func TestHeaderStyleString(t *testing.T) {
	for s, want := range map[adapter.HeaderStyle]string{
		adapter.HeadersBoth: "both", adapter.HeadersLegacy: "legacy", adapter.HeadersIETF: "ietf", adapter.HeadersNone: "none", 9: "headerstyle(9)",
	} {
		if got := s.String(); got != want {
			t.Errorf("HeaderStyle(%d).String() = %q, want %q", s, got, want)
		}
	}
}

func TestIETFDraftValidate(t *testing.T) {
	for d, ok := range map[adapter.IETFDraft]bool{0: true, adapter.IETFDraft10: true, 7: false, 12: false} {
		if err := d.Validate(); (err == nil) != ok {
			t.Errorf("IETFDraft(%d).Validate() = %v, want ok %v", d, err, ok)
		}
	}
}

// mapHeader is a ResponseHeader over a map.
type mapHeader map[string]string

func (m mapHeader) Get(name string) string { return m[name] }
func (m mapHeader) Set(name, value string) { m[name] = value }

func TestHeadersStacked(t *testing.T) {
	decision := func(rule string, limit core.Limit, remaining int, retry time.Duration) core.Decision {
		return core.Decision{Allowed: retry == 0, Limiting: 0, Results: []core.RuleResult{{
			Rule:   rule,
			Result: core.Result{Limit: limit, Allowed: retry == 0, Remaining: remaining, RetryAfter: retry, ResetAfter: 20 * time.Second},
		}}}
	}
	tests := []struct {
		name         string
		outer, inner core.Decision
		want         map[string]string
	}{
		{
			"inner more restrictive",
			decision("global", core.PerMinute(100), 96, 0),
			decision("login", core.PerMinute(2), 1, 0),
			map[string]string{
				adapter.HeaderLimit: "2", adapter.HeaderRemaining: "1", adapter.HeaderReset: "20",
				adapter.HeaderPolicy:    `"global";q=100;w=60, "login";q=2;w=60`,
				adapter.HeaderRateLimit: `"global";r=96;t=20, "login";r=1;t=20`,
			},
		},
		{
			"outer more restrictive",
			decision("global", core.PerMinute(100), 1, 0),
			decision("login", core.PerMinute(10), 5, 0),
			map[string]string{
				adapter.HeaderLimit: "100", adapter.HeaderRemaining: "1", adapter.HeaderReset: "20",
				adapter.HeaderPolicy: `"global";q=100;w=60, "login";q=10;w=60`,
			},
		},
		{
			"a tie goes to the inner",
			decision("global", core.PerMinute(100), 50, 0),
			decision("login", core.PerMinute(10), 5, 0),
			map[string]string{adapter.HeaderLimit: "10", adapter.HeaderRemaining: "5"},
		},
		{
			"inner denies",
			decision("global", core.PerMinute(100), 0, 0),
			decision("login", core.PerMinute(10), 0, 3*time.Second),
			map[string]string{adapter.HeaderLimit: "10", adapter.HeaderRemaining: "0", adapter.HeaderRetryAfter: "3"},
		},
		{
			"longer Retry-After kept",
			decision("global", core.PerMinute(100), 0, 10*time.Second),
			decision("login", core.PerMinute(10), 0, 3*time.Second),
			map[string]string{adapter.HeaderLimit: "10", adapter.HeaderRetryAfter: "10"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outer := adapter.NewHeaders(tt.outer, adapter.HeadersBoth, 0)
			inner := adapter.NewHeaders(tt.inner, adapter.HeadersBoth, 0)
			h := http.Header{}
			outer.SetHTTP(h)
			inner.SetHTTP(h)
			m := mapHeader{}
			outer.Set(m)
			inner.Set(m)
			for name, want := range tt.want {
				if got := h.Values(name); len(got) != 1 || got[0] != want {
					t.Errorf("SetHTTP: %s: %q, want %q", name, got, want)
				}
				if got := m[name]; got != want {
					t.Errorf("Set: %s: %q, want %q", name, got, want)
				}
			}
		})
	}
}
