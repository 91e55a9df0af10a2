package core

import (
	"slices"
	"sync/atomic"
)

// RuleSet holds rules that may be replaced while requests are checked
// against them: a middleware given a RuleSet reads its current rules at
// each request, so a reload (a changed file, an admin call) takes effect
// at once, without a restart. Storage keys depend only on a rule's name and
// the identity, so a rule replaced by one of the same name keeps what every
// identity spent, counted under the new limit. It is safe for concurrent
// use.
type RuleSet struct {
	rules atomic.Pointer[[]Rule]
}

// NewRuleSet returns a RuleSet holding a copy of rules, once it has checked
// them: at least one rule, no two of one name, each with a valid name
// (else an error wrapping [ErrInvalidName]), a key function (else
// [ErrInvalidRule]) and a valid [Limit] (else [ErrInvalidLimit]).
func NewRuleSet(rules []Rule) (*RuleSet, error) {
	s := new(RuleSet)
	if err := s.Replace(rules); err != nil {
		return nil, err
	}
	return s, nil
}

// Rules returns the current rules. The slice is shared: never modify it.
func (s *RuleSet) Rules() []Rule { return *s.rules.Load() }

// Replace validates rules as [NewRuleSet] does and, if they are valid,
// swaps them in at once for every request that starts after it returns;
// requests already being checked finish under the rules they started with.
// On an error the current rules stay.
func (s *RuleSet) Replace(rules []Rule) error {
	if err := validateRules(rules); err != nil {
		return err
	}
	c := slices.Clone(rules)
	s.rules.Store(&c)
	return nil
}
