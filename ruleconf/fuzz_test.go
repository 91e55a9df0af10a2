package ruleconf_test

import (
	"errors"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/ruleconf"
)

// FuzzParse checks that Parse never panics, that every error it returns is
// an *Error, and that the rules it returns pass core.NewRuleSet, with
// limits, per-plan limits and costs a Limiter accepts.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		contract,
		"rules:\n  - {name: a, limit: 5, period: 1s, key: user, cost: 2, shadow: true}\n",
		`{"rules": {"a": {"limit": 3, "algorithm": "fixed", "plans": {"pro": {"limit": 9, "period": "1h"}}}}}`,
		"x-h: &h {period: 1h}\nrules:\n  a: {<<: *h, limit: 2, plans: {p: 3}}\n  b: {<<: [*h], limit: 4, algorithm: sliding-log, cost: 4}\n",
		"rules:\n  a: &a {limit: 1, <<: *a}\n",
		"rules: {a: {limit: 99999999999999999999, period: 1ns, burst: -1}}",
	} {
		f.Add([]byte(seed))
	}
	reg := registry()
	plans := []string{"", "pro", "free", "p", "team"}
	f.Fuzz(func(t *testing.T, doc []byte) {
		rules, err := ruleconf.Parse(doc, reg)
		if err != nil {
			var e *ruleconf.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %q is not a *ruleconf.Error", err)
			}
			if rules != nil {
				t.Fatal("rules returned along with an error")
			}
			return
		}
		if _, err := core.NewRuleSet(rules); err != nil {
			t.Fatalf("Parse returned rules that fail NewRuleSet: %v", err)
		}
		for _, r := range rules {
			for _, plan := range plans {
				req := request("192.0.2.1:1", plan, "u")
				lim := limitOf(r, plan)
				if err := lim.Validate(); err != nil {
					t.Fatalf("rule %q, plan %q: %v", r.Name, plan, err)
				}
				if r.Cost != nil {
					if c := r.Cost(req); c < 1 || c > lim.Capacity() {
						t.Fatalf("rule %q, plan %q: cost %d outside [1, %d]", r.Name, plan, c, lim.Capacity())
					}
				}
			}
		}
	})
}
