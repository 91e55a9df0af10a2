package core

import (
	"context"
	"errors"
	"fmt"
)

// ErrUnavailable is returned, wrapping the store's own error, when the store
// could not decide and the failure policy is to fail closed: the request is
// denied (Decision.Allowed is false, every result Degraded) and adapters
// answer 503 with Retry-After.
var ErrUnavailable = errors.New("ratekit: store unavailable")

// Rule is one named limit applied to requests: every request that the rule
// does not skip spends Cost units of Limit from the identity that Key
// returns. Rules are plain values; [Rule.Validate] checks one, and every
// constructor that takes rules validates them, so a bad rule fails at start-up,
// never at request time.
type Rule struct {
	// Name identifies the rule in storage keys, headers and metrics, such
	// as "default" or "login". Replicas that share a Redis and name a rule
	// alike share its limit. See [ValidateName] for what it may contain.
	Name string
	// Limit is the rate the rule enforces.
	Limit Limit
	// Key returns the identity the rule limits. Required.
	Key KeyFunc
	// Cost returns how many units a request spends; nil means 1. A cost
	// below 1 is an error of the request.
	Cost func(Request) int
	// Skip reports whether the rule ignores a request; nil means never.
	Skip func(Request) bool
}

// Validate returns nil if the rule can be enforced, or an error that says
// what is wrong with it.
func (r Rule) Validate() error {
	if err := ValidateName("rule name", r.Name, false); err != nil {
		return err
	}
	if r.Key == nil {
		return fmt.Errorf("%w: rule %q has no key function", ErrInvalidName, r.Name)
	}
	if err := r.Limit.Validate(); err != nil {
		return fmt.Errorf("rule %q: %w", r.Name, err)
	}
	return nil
}

// ValidateRules validates each rule and checks that no two share a name.
func ValidateRules(rules []Rule) error {
	if len(rules) == 0 {
		return fmt.Errorf("%w: no rules", ErrInvalidName)
	}
	seen := make(map[string]bool, len(rules))
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			return err
		}
		if seen[r.Name] {
			return fmt.Errorf("%w: two rules named %q", ErrInvalidName, r.Name)
		}
		seen[r.Name] = true
	}
	return nil
}

// RuleResult is one rule's part of a [Decision].
type RuleResult struct {
	// Rule is the rule's name.
	Rule string
	Result
}

// Decision is the outcome of checking a request against a set of rules.
type Decision struct {
	// Allowed reports whether the request may proceed: every rule that
	// applied allowed it.
	Allowed bool
	// Results holds one entry per rule that applied (skipped rules are
	// absent), in rule order.
	Results []RuleResult
	// Limiting indexes Results: the most restrictive rule, which drives the
	// X-RateLimit-* headers. It is the denying rule with the longest
	// RetryAfter when the request is denied, else the rule with the fewest
	// units remaining. -1 when no rule applied.
	Limiting int
}

// LimitingResult returns the most restrictive rule's result, and false when no
// rule applied.
func (d Decision) LimitingResult() (RuleResult, bool) {
	if d.Limiting < 0 || d.Limiting >= len(d.Results) {
		return RuleResult{}, false
	}
	return d.Results[d.Limiting], true
}

// Degraded reports whether any rule was decided without the shared store.
func (d Decision) Degraded() bool {
	for _, r := range d.Results {
		if r.Degraded {
			return true
		}
	}
	return false
}

// Limiter checks requests against rules with a [Store]. It is safe for
// concurrent use, and one Limiter serves any number of middlewares and rule
// sets.
type Limiter struct {
	store  Store
	prefix string
}

// LimiterOption configures a [Limiter].
type LimiterOption func(*Limiter) error

// WithPrefix sets the prefix of every storage key, "ratekit:" by default.
// Applications sharing one Redis separate their keys with it.
func WithPrefix(prefix string) LimiterOption {
	return func(l *Limiter) error {
		if err := ValidateName("prefix", prefix, true); err != nil {
			return err
		}
		l.prefix = prefix
		return nil
	}
}

// DefaultPrefix starts every storage key unless [WithPrefix] says otherwise.
const DefaultPrefix = "ratekit:"

// NewLimiter returns a Limiter over store.
func NewLimiter(store Store, opts ...LimiterOption) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("ratekit: NewLimiter: nil store")
	}
	l := &Limiter{store: store, prefix: DefaultPrefix}
	for _, o := range opts {
		if err := o(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Close releases the Limiter's background resources. It does not close the
// store.
func (l *Limiter) Close() error { return nil }

// StorageKey returns the storage key of identity under the named rule, as
// this Limiter builds it: prefix + rule + ":{" + identity + "}".
func (l *Limiter) StorageKey(rule, identity string) (string, error) {
	return key(l.prefix, rule, identity)
}

// Check decides req against rules, in order, and spends each applicable
// rule's cost if and only if the rules of one identity all allow it. Rules
// of one identity are decided together in one store call; rules of
// different identities are decided one identity after the other, and the
// first identity whose rules deny stops the rest.
//
// Check returns an error wrapping [ErrNoIdentity] when a rule's key
// function finds no identity, and any other error from a key or cost
// function or from the store. Rules must have been validated with
// [ValidateRules].
func (l *Limiter) Check(ctx context.Context, req Request, rules []Rule) (Decision, error) {
	d := Decision{Allowed: true, Limiting: -1}
	type group struct {
		identity string
		cost     int
		checks   []Check
		names    []string
	}
	var groups []group
	for i := range rules {
		r := &rules[i]
		if r.Skip != nil && r.Skip(req) {
			continue
		}
		id, err := r.Key(req)
		if err != nil {
			return Decision{}, fmt.Errorf("rule %q: %w", r.Name, err)
		}
		cost := 1
		if r.Cost != nil {
			cost = r.Cost(req)
		}
		k, err := l.StorageKey(r.Name, id)
		if err != nil {
			return Decision{}, err
		}
		gi := -1
		for j := range groups {
			if groups[j].identity == id && groups[j].cost == cost {
				gi = j
				break
			}
		}
		if gi < 0 {
			groups = append(groups, group{identity: id, cost: cost})
			gi = len(groups) - 1
		}
		groups[gi].checks = append(groups[gi].checks, Check{Key: k, Limit: r.Limit})
		groups[gi].names = append(groups[gi].names, r.Name)
	}
	for _, g := range groups {
		results, err := l.store.AllowAllN(ctx, g.checks, g.cost)
		if err != nil {
			return Decision{}, err
		}
		for i, res := range results {
			d.Results = append(d.Results, RuleResult{Rule: g.names[i], Result: res})
			d.Allowed = d.Allowed && res.Allowed
		}
		if !d.Allowed {
			break
		}
	}
	d.Limiting = mostRestrictive(d.Results)
	return d, nil
}

// mostRestrictive picks the result that drives the X-RateLimit-* headers:
// among denials the longest wait (a never-allowable cost first), else the
// fewest units remaining relative to capacity, then the longest reset.
func mostRestrictive(results []RuleResult) int {
	best := -1
	for i := range results {
		if best < 0 || moreRestrictive(results[i].Result, results[best].Result) {
			best = i
		}
	}
	return best
}

func moreRestrictive(a, b Result) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if !a.Allowed {
		if a.Never() != b.Never() {
			return a.Never()
		}
		return a.RetryAfter > b.RetryAfter
	}
	// compare remaining/capacity without division
	ra := int64(a.Remaining) * int64(b.Limit.Capacity())
	rb := int64(b.Remaining) * int64(a.Limit.Capacity())
	if ra != rb {
		return ra < rb
	}
	return a.ResetAfter > b.ResetAfter
}
