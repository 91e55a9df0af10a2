package ruleconf

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
)

// document returns the rules of the document node root.
func (d *decoder) document(root *yaml.Node) ([]core.Rule, error) {
	top := root
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		top = root.Content[0]
	}
	es, err := d.mapping(top, "", "")
	if err != nil {
		return nil, err
	}
	var rules *yaml.Node
	for _, e := range es {
		switch {
		case e.key == "rules":
			rules = e.value
		case !strings.HasPrefix(e.key, "x-"):
			return nil, d.errorf(e.kline, "", "", "unknown field %q (want rules, or x-... for anchors)", e.key)
		}
	}
	if rules == nil {
		return nil, d.errorf(top, "", "", "no rules field")
	}
	named, err := d.ruleNodes(rules)
	if err != nil {
		return nil, err
	}
	out := make([]core.Rule, 0, len(named))
	for _, nr := range named {
		r, err := d.rule(nr)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if _, err := core.NewRuleSet(out); err != nil {
		return nil, d.wrap(rules, "", "rules", err)
	}
	return out, nil
}

// namedRule is a rule's node and its name.
type namedRule struct {
	name     string
	at       *yaml.Node // the name's node, for its line
	fields   []entry
	listForm bool // the rule came from a list and names itself
}

// ruleNodes returns the rules of the rules node, a mapping of names to
// rules or a list of rules that name themselves, in order.
func (d *decoder) ruleNodes(n *yaml.Node) ([]namedRule, error) {
	switch n = resolve(n); n.Kind {
	case yaml.MappingNode:
		es, err := d.entries(n, "", "rules", 0)
		if err != nil {
			return nil, err
		}
		out := make([]namedRule, 0, len(es))
		for _, e := range es {
			fields, err := d.mapping(e.value, e.key, "")
			if err != nil {
				return nil, err
			}
			out = append(out, namedRule{name: e.key, at: e.kline, fields: fields})
		}
		return d.unique(out)
	case yaml.SequenceNode:
		out := make([]namedRule, 0, len(n.Content))
		for _, item := range n.Content {
			nr, err := d.listedRule(item)
			if err != nil {
				return nil, err
			}
			out = append(out, nr)
		}
		return d.unique(out)
	}
	return nil, d.errorf(n, "", "rules", "want a mapping of rule names to rules, or a list of rules, got %s", describe(n))
}

// listedRule returns a rule of the list form, which names itself.
func (d *decoder) listedRule(item *yaml.Node) (namedRule, error) {
	fields, err := d.mapping(item, "", "rules")
	if err != nil {
		return namedRule{}, err
	}
	for _, e := range fields {
		if e.key == "name" {
			name, err := d.text(e.value, "", "rules: name")
			return namedRule{name: name, at: e.value, fields: fields, listForm: true}, err
		}
	}
	return namedRule{}, d.errorf(item, "", "rules", "a rule in a list needs a name")
}

// unique returns rules, or an error for an empty name or a name that two
// rules share.
func (d *decoder) unique(rules []namedRule) ([]namedRule, error) {
	first := make(map[string]*yaml.Node, len(rules))
	for _, r := range rules {
		if r.name == "" {
			return nil, d.wrap(r.at, "", "rules", fmt.Errorf("%w: empty rule name", core.ErrInvalidName))
		}
		if at, dup := first[r.name]; dup {
			return nil, d.wrap(r.at, r.name, "", fmt.Errorf("%w: two rules named %q (the first on line %d)", core.ErrInvalidName, r.name, at.Line))
		}
		first[r.name] = r.at
	}
	return rules, nil
}

// ruleFields are the fields of a rule, in the order the errors list them.
var ruleFields = []string{"limit", "period", "algorithm", "burst", "key", "plans", "cost", "shadow"}

// spec is a rule's fields as the document gives them; nil when absent.
type spec struct {
	values map[string]*yaml.Node
	at     *yaml.Node
}

// rule returns the rule nr defines.
func (d *decoder) rule(nr namedRule) (core.Rule, error) {
	s := spec{values: make(map[string]*yaml.Node, len(nr.fields)), at: nr.at}
	for _, e := range nr.fields {
		if e.key == "name" && nr.listForm {
			continue
		}
		if !slices.Contains(ruleFields, e.key) {
			return core.Rule{}, d.errorf(e.kline, nr.name, "", "unknown field %q (want %s)", e.key, strings.Join(ruleFields, ", "))
		}
		s.values[e.key] = e.value
	}
	r := core.Rule{Name: nr.name}
	var err error
	if r.Limit, err = d.limit(s, nr.name, "", nil); err != nil {
		return core.Rule{}, err
	}
	if r.Key, err = d.key(s, nr.name); err != nil {
		return core.Rule{}, err
	}
	plans, err := d.plans(s, nr.name, r.Limit)
	if err != nil {
		return core.Rule{}, err
	}
	if plans != nil {
		if r.LimitOf, err = keyfuncs.PlanLimits(d.reg.Plan, plans); err != nil {
			return core.Rule{}, d.wrap(s.values["plans"], nr.name, "plans", err)
		}
	}
	if r.Cost, err = d.cost(s, nr.name, r.Limit, plans); err != nil {
		return core.Rule{}, err
	}
	if n := s.values["shadow"]; n != nil {
		if r.Shadow, err = d.boolean(n, nr.name, "shadow"); err != nil {
			return core.Rule{}, err
		}
	}
	if _, err := core.NewRuleSet([]core.Rule{r}); err != nil {
		return core.Rule{}, d.wrap(nr.at, nr.name, "", err) // the name
	}
	return r, nil
}

// limit returns the limit of s, whose fields are limit, period, algorithm
// and burst. Fields s lacks come from the rule's limit def for a plan, and
// from the defaults when def is nil. field prefixes the fields in errors.
func (d *decoder) limit(s spec, rule, field string, def *core.Limit) (core.Limit, error) {
	lim := core.Limit{Period: DefaultPeriod}
	if def != nil {
		lim.Period, lim.Algorithm = def.Period, def.Algorithm
	}
	var err error
	n := s.values["limit"]
	if n == nil {
		return lim, d.errorf(s.at, rule, strings.TrimSuffix(field, "."), "no limit: want the units allowed per period")
	}
	if lim.Rate, err = d.integer(n, rule, field+"limit"); err != nil {
		return lim, err
	}
	if p := s.values["period"]; p != nil {
		if lim.Period, err = d.duration(p, rule, field+"period"); err != nil {
			return lim, err
		}
	}
	if a := s.values["algorithm"]; a != nil {
		name, err := d.text(a, rule, field+"algorithm")
		if err != nil {
			return lim, err
		}
		if lim.Algorithm, err = core.ParseAlgorithm(name); err != nil {
			return lim, d.wrap(a, rule, field+"algorithm", err)
		}
	}
	lim.Burst = lim.Rate
	if b := s.values["burst"]; b != nil {
		if lim.Algorithm != core.GCRA {
			return lim, d.errorf(b, rule, field+"burst", "%w: burst applies to gcra only; %v lets up to its limit through at once", core.ErrInvalidLimit, lim.Algorithm)
		}
		if lim.Burst, err = d.integer(b, rule, field+"burst"); err != nil {
			return lim, err
		}
	}
	if err := lim.Validate(); err != nil {
		return lim, d.wrap(n, rule, strings.TrimSuffix(field, "."), err)
	}
	return lim, nil
}

// key returns the key function that s names, or the registry's default.
func (d *decoder) key(s spec, rule string) (core.KeyFunc, error) {
	name, at := d.reg.DefaultKey, s.at
	if n := s.values["key"]; n != nil {
		var err error
		if name, err = d.text(n, rule, "key"); err != nil {
			return nil, err
		}
		at = n
	}
	known := slices.Sorted(maps.Keys(d.reg.Keys))
	if name == "" {
		return nil, d.errorf(at, rule, "key", "no key: name one of %s", strings.Join(known, ", "))
	}
	fn, ok := d.reg.Keys[name]
	if !ok {
		return nil, d.errorf(at, rule, "key", "unknown key function %q (want one of %s)", name, strings.Join(known, ", "))
	}
	return fn, nil
}

// plans returns the plans table of s, nil when it has none. Plans take the
// period and algorithm of def, the rule's limit.
func (d *decoder) plans(s spec, rule string, def core.Limit) (map[string]core.Limit, error) {
	n := s.values["plans"]
	if n == nil {
		return nil, nil
	}
	es, err := d.mapping(n, rule, "plans")
	if err != nil {
		return nil, err
	}
	if d.reg.Plan == nil {
		return nil, d.errorf(n, rule, "plans", "the application gives no plan function (Registry.Plan) to pick a plan by")
	}
	out := make(map[string]core.Limit, len(es))
	for _, e := range es {
		field := "plans." + e.key
		if e.key == "" {
			return nil, d.errorf(e.kline, rule, "plans", "empty plan name: a request without a plan gets the rule's limit")
		}
		ps := spec{values: map[string]*yaml.Node{"limit": e.value}, at: e.kline}
		switch v := resolve(e.value); {
		case v.Kind == yaml.MappingNode:
			if ps, err = d.planSpec(v, rule, field); err != nil {
				return nil, err
			}
		case v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int":
			return nil, d.errorf(e.value, rule, field, "want a limit (an integer) or a mapping of limit, period and burst, got %s", describe(v))
		}
		if out[e.key], err = d.limit(ps, rule, field+".", &def); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// planFields are the fields of a plan written as a mapping.
var planFields = []string{"limit", "period", "burst"}

// planSpec returns the fields of a plan written as a mapping.
func (d *decoder) planSpec(n *yaml.Node, rule, field string) (spec, error) {
	es, err := d.entries(n, rule, field, 0)
	if err != nil {
		return spec{}, err
	}
	s := spec{values: make(map[string]*yaml.Node, len(es)), at: n}
	for _, e := range es {
		if !slices.Contains(planFields, e.key) {
			hint := ""
			if e.key == "algorithm" {
				hint = "; a plan shares its rule's algorithm, as it shares its storage keys"
			}
			return spec{}, d.errorf(e.kline, rule, field, "unknown field %q (want %s)%s", e.key, strings.Join(planFields, ", "), hint)
		}
		s.values[e.key] = e.value
	}
	return s, nil
}

// cost returns the cost function of s, nil for the default of 1. A cost
// that the rule's limit or one of its plans could never allow is an error.
func (d *decoder) cost(s spec, rule string, def core.Limit, plans map[string]core.Limit) (func(core.Request) int, error) {
	n := s.values["cost"]
	if n == nil {
		return nil, nil
	}
	cost, err := d.integer(n, rule, "cost")
	if err != nil {
		return nil, err
	}
	if cost < 1 {
		return nil, d.wrap(n, rule, "cost", fmt.Errorf("%w: cost %d is below 1", core.ErrInvalidCost, cost))
	}
	check := func(what string, lim core.Limit) error {
		switch {
		case cost > lim.Capacity():
			return fmt.Errorf("%w: cost %d exceeds the capacity %d of %s, which would never allow a request", core.ErrInvalidCost, cost, lim.Capacity(), what)
		case lim.Algorithm == core.SlidingWindowLog && cost > core.MaxLogCost:
			return fmt.Errorf("%w: cost %d exceeds the %d units a sliding-log call may spend", core.ErrInvalidCost, cost, core.MaxLogCost)
		}
		return nil
	}
	if err := check("the rule's limit", def); err != nil {
		return nil, d.wrap(n, rule, "cost", err)
	}
	for _, name := range slices.Sorted(maps.Keys(plans)) {
		if err := check("plan "+strconv.Quote(name), plans[name]); err != nil {
			return nil, d.wrap(n, rule, "cost", err)
		}
	}
	return func(core.Request) int { return cost }, nil
}
