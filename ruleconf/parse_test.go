package ruleconf_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/ruleconf"
)

// contract is the rules file of the example apps' contract.
const contract = `
rules:
  default: {limit: 10, period: 1m, algorithm: gcra, burst: 20, plans: {pro: 100, free: 5}}
  strict:  {limit: 2, period: 1m}
`

func TestParseContract(t *testing.T) {
	rules := mustParse(t, contract, registry())
	if got, want := names(rules), []string{"default", "strict"}; !slices.Equal(got, want) {
		t.Fatalf("rules = %q, want %q", got, want)
	}
	def, strict := rules[0], rules[1]
	for _, tt := range []struct {
		rule core.Rule
		plan string
		want core.Limit
	}{
		{def, "", core.PerMinute(10).WithBurst(20)},
		{def, "pro", core.PerMinute(100)},
		{def, "free", core.PerMinute(5)},
		{def, "platinum", core.PerMinute(10).WithBurst(20)},
		{def, "Pro", core.PerMinute(10).WithBurst(20)}, // plan names are exact
		{strict, "pro", core.PerMinute(2)},
	} {
		if got := limitOf(tt.rule, tt.plan); got != tt.want {
			t.Errorf("rule %q, plan %q: limit %v, want %v", tt.rule.Name, tt.plan, got, tt.want)
		}
	}
	if strict.LimitOf != nil || strict.Cost != nil || strict.Shadow {
		t.Fatal("strict has fields its document does not set")
	}
	if id, err := def.Key(request("192.0.2.9:1", "", "")); err != nil || id != "ip:192.0.2.9:1" {
		t.Fatalf("default rule's key = %q, %v: want the registry's default key", id, err)
	}
}

// TestParseForms checks that the mapping, list and JSON forms of one set of
// rules, and one that merges a template, say the same, in document order.
func TestParseForms(t *testing.T) {
	forms := map[string]string{
		"mapping": `
rules:
  zeta: {limit: 5, period: 1s, key: user, cost: 2, shadow: true}
  alpha: {limit: 100, period: 1h, algorithm: sliding-counter, plans: {pro: {limit: 1000, period: 30m}}}
  mid: {limit: 3, burst: 6, plans: {pro: {limit: 30, burst: 60}, free: 1}}
`,
		"list": `
rules:
  - {name: zeta, limit: 5, period: 1s, key: user, cost: 2, shadow: true}
  - name: alpha
    limit: 100
    period: 1h
    algorithm: SLIDING-COUNTER
    plans:
      pro: {limit: 1000, period: 30m}
  - {name: mid, limit: 3, period: 1m, burst: 6, plans: {pro: {limit: 30, burst: 60}, free: 1}}
`,
		"json": "{\n\t\"rules\": {\n\t\t\"zeta\": {\"limit\": 5, \"period\": \"1s\", \"key\": \"user\", \"cost\": 2, \"shadow\": true},\n" +
			"\t\t\"alpha\": {\"limit\": 100, \"period\": \"1h\", \"algorithm\": \"sliding-counter\", \"plans\": {\"pro\": {\"limit\": 1000, \"period\": \"30m\"}}},\n" +
			"\t\t\"mid\": {\"limit\": 3, \"burst\": 6, \"plans\": {\"pro\": {\"limit\": 30, \"burst\": 60}, \"free\": 1}}\n\t}\n}\n",
		"merged": `
x-hourly: &hourly {limit: 1, period: 1h, algorithm: sliding-counter}
x-mid: &mid
  zeta: {limit: 1}
  mid: {limit: 3, burst: 6, plans: {pro: {limit: 30, burst: 60}, free: 1}}
rules:
  zeta: &zeta {limit: 5, period: 1s, key: user, cost: 2, shadow: true}
  alpha: {<<: *hourly, limit: 100, plans: {pro: {limit: 1000, period: 30m}}}
  <<: *mid
`,
	}
	sliding := core.Limit{Rate: 100, Period: time.Hour, Burst: 100, Algorithm: core.SlidingWindowCounter}
	want := []struct {
		name   string
		limits map[string]core.Limit // by plan; "" is the default
		user   bool
		cost   int
		shadow bool
	}{
		{"zeta", map[string]core.Limit{"": core.PerSecond(5), "pro": core.PerSecond(5)}, true, 2, true},
		{"alpha", map[string]core.Limit{"": sliding, "pro": {Rate: 1000, Period: 30 * time.Minute, Burst: 1000, Algorithm: core.SlidingWindowCounter}}, false, 1, false},
		{"mid", map[string]core.Limit{"": core.PerMinute(3).WithBurst(6), "pro": core.PerMinute(30).WithBurst(60), "free": core.PerMinute(1)}, false, 1, false},
	}
	for form, doc := range forms {
		t.Run(form, func(t *testing.T) {
			rules := mustParse(t, doc, registry())
			if len(rules) != len(want) {
				t.Fatalf("rules = %q, want %d", names(rules), len(want))
			}
			for i, w := range want {
				r := rules[i]
				if r.Name != w.name {
					t.Fatalf("rule %d = %q, want %q", i, r.Name, w.name)
				}
				for plan, lim := range w.limits {
					if got := limitOf(r, plan); got != lim {
						t.Errorf("rule %q, plan %q: limit %v, want %v", r.Name, plan, got, lim)
					}
				}
				req := request("192.0.2.1:1", "", "ann")
				if id, _ := r.Key(req); (id == "user:ann") != w.user {
					t.Errorf("rule %q: identity %q, want the user key: %v", r.Name, id, w.user)
				}
				cost := 1
				if r.Cost != nil {
					cost = r.Cost(req)
				}
				if cost != w.cost || r.Shadow != w.shadow {
					t.Errorf("rule %q: cost %d, shadow %v; want %d, %v", r.Name, cost, r.Shadow, w.cost, w.shadow)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	noPlan := registry()
	noPlan.Plan = nil
	noDefault := registry()
	noDefault.DefaultKey = ""
	// eight rules merged 8⁷ times over
	nested := "x-0: &l0 {a: {limit: 1}, b: {limit: 1}, c: {limit: 1}, d: {limit: 1}, e: {limit: 1}, f: {limit: 1}, g: {limit: 1}, h: {limit: 1}}\n"
	for i := 1; i <= 7; i++ {
		prev := "*l" + string(rune('0'+i-1))
		nested += "x-" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " {<<: [" + strings.Repeat(prev+", ", 7) + prev + "]}\n"
	}
	nested += "rules: {<<: *l7}\n"
	tests := []struct {
		name  string
		doc   string
		reg   ruleconf.Registry
		line  int
		rule  string
		field string
		is    error
		msg   string
	}{
		{"not yaml", "rules: [", registry(), 0, "", "", nil, "did not find expected node content"},
		{"empty", "", registry(), 0, "", "", nil, "empty document"},
		{"only a comment", "# nothing\n", registry(), 0, "", "", nil, "empty document"},
		{"two documents", "rules: {a: {limit: 1}}\n---\nrules: {}\n", registry(), 2, "", "", nil, "more than one document"},
		{"a list", "- rules\n", registry(), 1, "", "", nil, "want a mapping, got a list"},
		{"unknown field", "rules: {a: {limit: 1}}\nrule: {}\n", registry(), 2, "", "", nil, `unknown field "rule"`},
		{"no rules", "x-a: 1\n", registry(), 1, "", "", nil, "no rules field"},
		{"rules a number", "rules: 3\n", registry(), 1, "", "rules", nil, "got integer 3"},
		{"no rule", "rules: {}\n", registry(), 1, "", "rules", core.ErrInvalidRule, "no rules"},
		{"rule a number", "rules:\n  a: 3\n", registry(), 2, "a", "", nil, "want a mapping, got integer 3"},
		{"rule null", "rules:\n  a:\n", registry(), 2, "a", "", nil, "want a mapping, got null"},
		{"unknown rule field", "rules:\n  a: {limit: 1, limt: 2}\n", registry(), 2, "a", "", nil, `unknown field "limt" (want limit, period,`},
		{"field twice", "rules:\n  a:\n    limit: 1\n    limit: 2\n", registry(), 4, "a", "", nil, `"limit" appears twice (first on line 3)`},
		{"no limit", "rules:\n  a: {period: 1m}\n", registry(), 2, "a", "", nil, "no limit"},
		{"limit a string", "rules:\n  a: {limit: \"10\"}\n", registry(), 2, "a", "limit", nil, `want an integer, got string "10"`},
		{"limit a float", "rules:\n  a: {limit: 1.5}\n", registry(), 2, "a", "limit", nil, "got float 1.5"},
		{"limit zero", "rules:\n  a: {limit: 0}\n", registry(), 2, "a", "", core.ErrInvalidLimit, "rate 0 out of range"},
		{"limit huge", "rules:\n  a: {limit: 99999999999999999999}\n", registry(), 2, "a", "limit", nil, "out of range"},
		{"period a number", "rules:\n  a: {limit: 1, period: 60}\n", registry(), 2, "a", "period", nil, "(a number needs a unit), got integer 60"},
		{"period garbage", "rules:\n  a: {limit: 1, period: soon}\n", registry(), 2, "a", "period", nil, `got "soon"`},
		{"period too short", "rules:\n  a: {limit: 1, period: 500us}\n", registry(), 2, "a", "", core.ErrInvalidLimit, "period 500µs out of range"},
		{"period negative", "rules:\n  a: {limit: 1, period: -1m}\n", registry(), 2, "a", "", core.ErrInvalidLimit, "out of range"},
		{"algorithm unknown", "rules:\n  a: {limit: 1, algorithm: leaky}\n", registry(), 2, "a", "algorithm", core.ErrInvalidLimit, `unknown algorithm "leaky"`},
		{"algorithm a number", "rules:\n  a: {limit: 1, algorithm: 2}\n", registry(), 2, "a", "algorithm", nil, "want a string"},
		{"burst with fixed", "rules:\n  a: {limit: 1, algorithm: fixed, burst: 2}\n", registry(), 2, "a", "burst", core.ErrInvalidLimit, "gcra only"},
		{"burst zero", "rules:\n  a: {limit: 1, burst: 0}\n", registry(), 2, "a", "", core.ErrInvalidLimit, "burst 0 out of range"},
		{"sliding log too fast", "rules:\n  a: {limit: 20000, algorithm: sliding-log}\n", registry(), 2, "a", "", core.ErrInvalidLimit, "sliding"},
		{"key unknown", "rules:\n  a: {limit: 1, key: jwt}\n", registry(), 2, "a", "key", nil, `unknown key function "jwt" (want one of ip, user)`},
		{"key empty", "rules:\n  a: {limit: 1, key: \"\"}\n", registry(), 2, "a", "key", nil, "empty string"},
		{"no key, no default", "rules:\n  a: {limit: 1}\n", noDefault, 2, "a", "key", nil, "no key: name one of ip, user"},
		{"plans without a plan function", "rules:\n  a: {limit: 1, plans: {pro: 2}}\n", noPlan, 2, "a", "plans", nil, "Registry.Plan"},
		{"plans a list", "rules:\n  a: {limit: 1, plans: [pro]}\n", registry(), 2, "a", "plans", nil, "want a mapping, got a list"},
		{"plan a string", "rules:\n  a: {limit: 1, plans: {pro: lots}}\n", registry(), 2, "a", "plans.pro", nil, `want a limit (an integer) or a mapping of limit, period and burst, got string "lots"`},
		{"plan zero", "rules:\n  a: {limit: 1, plans: {pro: 0}}\n", registry(), 2, "a", "plans.pro", core.ErrInvalidLimit, "rate 0"},
		{"plan without limit", "rules:\n  a: {limit: 1, plans: {pro: {period: 1h}}}\n", registry(), 2, "a", "plans.pro", nil, "no limit"},
		{"plan algorithm", "rules:\n  a: {limit: 1, plans: {pro: {limit: 2, algorithm: fixed}}}\n", registry(), 2, "a", "plans.pro", nil, "shares its rule's algorithm"},
		{"plan period", "rules:\n  a: {limit: 1, plans: {pro: {limit: 2, period: 1}}}\n", registry(), 2, "a", "plans.pro.period", nil, "a number needs a unit"},
		{"plan burst with fixed", "rules:\n  a: {limit: 1, algorithm: fixed, plans: {pro: {limit: 2, burst: 4}}}\n", registry(), 2, "a", "plans.pro.burst", core.ErrInvalidLimit, "gcra only"},
		{"plan named twice", "rules:\n  a:\n    limit: 1\n    plans:\n      pro: 2\n      pro: 3\n", registry(), 6, "a", "plans", nil, `"pro" appears twice`},
		{"empty plan name", "rules:\n  a: {limit: 1, plans: {\"\": 2}}\n", registry(), 2, "a", "plans", nil, "empty plan name"},
		{"cost zero", "rules:\n  a: {limit: 1, cost: 0}\n", registry(), 2, "a", "cost", core.ErrInvalidCost, "below 1"},
		{"cost above the limit", "rules:\n  a: {limit: 5, burst: 2, cost: 3}\n", registry(), 2, "a", "cost", core.ErrInvalidCost, "capacity 2 of the rule's limit"},
		{"cost above a plan", "rules:\n  a: {limit: 5, cost: 3, plans: {free: 2}}\n", registry(), 2, "a", "cost", core.ErrInvalidCost, `capacity 2 of plan "free"`},
		{"cost above the log's", "rules:\n  a: {limit: 1000, cost: 500, algorithm: sliding-log}\n", registry(), 2, "a", "cost", core.ErrInvalidCost, "sliding-log"},
		{"shadow yes", "rules:\n  a: {limit: 1, shadow: yes}\n", registry(), 2, "a", "shadow", nil, `want true or false, got string "yes"`},
		{"rule named twice", "rules:\n  a: {limit: 1}\n  a: {limit: 2}\n", registry(), 3, "", "rules", nil, `"a" appears twice (first on line 2)`},
		{"rule named twice in a list", "rules:\n  - {name: a, limit: 1}\n  - {name: a, limit: 2}\n", registry(), 3, "a", "", core.ErrInvalidName, "first on line 2"},
		{"rule name a number", "rules:\n  1: {limit: 1}\n", registry(), 2, "", "rules", nil, "want a string key, got integer 1"},
		{"rule name empty", "rules:\n  \"\": {limit: 1}\n", registry(), 2, "", "rules", core.ErrInvalidName, "empty rule name"},
		{"rule name with a brace", "rules:\n  \"a{b}\": {limit: 1}\n", registry(), 2, "a{b}", "", core.ErrInvalidName, "contains"},
		{"rule name too long", "rules:\n  " + strings.Repeat("n", core.MaxNameLen+1) + ": {limit: 1}\n", registry(), 2, strings.Repeat("n", core.MaxNameLen+1), "", core.ErrInvalidName, "longer than"},
		{"listed rule without a name", "rules:\n  - {limit: 1}\n", registry(), 2, "", "rules", nil, "needs a name"},
		{"listed rule a string", "rules:\n  - a\n", registry(), 2, "", "rules", nil, `want a mapping, got string "a"`},
		{"listed name a number", "rules:\n  - {name: 7, limit: 1}\n", registry(), 2, "", "rules: name", nil, "want a string, got integer 7"},
		{"merge of a scalar", "rules:\n  a: {<<: 1, limit: 1}\n", registry(), 2, "a", "", nil, "merges mappings, got integer 1"},
		{"merge of itself", "rules:\n  a: &a {limit: 1, <<: *a}\n", registry(), 2, "a", "", nil, "nested more than"},
		{"merges that explode", nested, registry(), 2, "", "rules", ruleconf.ErrTooLarge, "expand to more than the"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := ruleconf.Parse([]byte(tt.doc), tt.reg)
			if err == nil {
				t.Fatalf("Parse returned %d rules and no error", len(rules))
			}
			var e *ruleconf.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %q is not a *ruleconf.Error", err)
			}
			if e.Line != tt.line || e.Rule != tt.rule || e.Field != tt.field {
				t.Errorf("error at line %d, rule %q, field %q; want %d, %q, %q", e.Line, e.Rule, e.Field, tt.line, tt.rule, tt.field)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
		})
	}
}

// TestParseMergeOverride checks that a rule written in the rules mapping
// replaces a rule of the same name merged into it, wherever the merge key
// is, and that merged rules take the place of their merge key.
func TestParseMergeOverride(t *testing.T) {
	rules := mustParse(t, `
x-defaults: &defaults
  a: {limit: 1}
  b: {limit: 2}
rules:
  <<: *defaults
  a: {limit: 10}
  c: {limit: 3}
`, registry())
	if got, want := names(rules), []string{"b", "a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("rules = %q, want %q", got, want)
	}
	if got, want := rules[1].Limit, core.PerMinute(10); got != want {
		t.Fatalf("rule a: limit %v, want the one written out, %v", got, want)
	}
}
