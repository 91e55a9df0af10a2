package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
)

// TestMostRestrictive holds the order that picks the result behind the
// headers: denials, then shadow denials, then allowances by the share of
// capacity left, each tie broken as documented, the first of equals kept.
func TestMostRestrictive(t *testing.T) {
	ten := core.PerMinute(10)
	hundred := core.PerMinute(100)
	allow := func(l core.Limit, remaining int, reset time.Duration) core.RuleResult {
		return core.RuleResult{Result: core.Result{Limit: l, Allowed: true, Remaining: remaining, ResetAfter: reset}}
	}
	deny := func(retry time.Duration, shadow bool) core.RuleResult {
		return core.RuleResult{Shadow: shadow, Result: core.Result{Limit: ten, RetryAfter: retry}}
	}
	cases := []struct {
		name    string
		results []core.RuleResult
		want    int
	}{
		{"none", nil, -1},
		{"one", []core.RuleResult{allow(ten, 5, 0)}, 0},
		{"a denial over any allowance", []core.RuleResult{allow(ten, 0, time.Hour), deny(time.Second, false)}, 1},
		{"a denial over a shadow denial", []core.RuleResult{deny(time.Hour, true), deny(time.Second, false)}, 1},
		{"a shadow denial over an allowance", []core.RuleResult{allow(ten, 0, time.Hour), deny(time.Second, true)}, 1},
		{"the longest wait among denials", []core.RuleResult{deny(time.Second, false), deny(time.Minute, false), deny(2*time.Second, false)}, 1},
		{"a cost that can never pass before any wait", []core.RuleResult{deny(time.Hour, false), deny(-1, false)}, 1},
		{"the smallest share left", []core.RuleResult{allow(ten, 5, 0), allow(hundred, 20, 0)}, 1},
		{"shares compared, not units", []core.RuleResult{allow(ten, 3, 0), allow(hundred, 20, 0)}, 1},
		{"the longer reset on equal shares", []core.RuleResult{allow(ten, 5, time.Second), allow(hundred, 50, time.Minute)}, 1},
		{"the first of equals", []core.RuleResult{allow(ten, 5, time.Second), allow(ten, 5, time.Second)}, 0},
	}
	for _, c := range cases {
		if got := core.MostRestrictive(c.results); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// An adapter that gives a unit back after the decision picks the limiting
// rule again among the results it changed.
func ExampleMostRestrictive() {
	results := []core.RuleResult{
		{Rule: "per-minute", Result: core.Result{Limit: core.PerMinute(10), Allowed: true, Remaining: 2}},
		{Rule: "per-hour", Result: core.Result{Limit: core.PerHour(100), Allowed: true, Remaining: 30}},
	}
	fmt.Println(results[core.MostRestrictive(results)].Rule)
	results[0].Remaining += 2 // a count-only rule's unit given back
	fmt.Println(results[core.MostRestrictive(results)].Rule)
	// Output:
	// per-minute
	// per-hour
}
