package adapter

import (
	"fmt"

	"github.com/ratekit/ratekit/core"
)

// This file holds the two steps that every adapter's constructor takes the
// same way, whatever its framework: making an option that sets one of its
// framework-typed hooks, and turning its options into a Middleware. What
// the adapter's handler then does with an [Outcome] (copy the headers,
// call the next handler, its denied or error hook, or write the default
// problem) is a few lines in the framework's own idiom, and stays there.

// WithHook returns the option called name (such as "WithSkip") that sets
// one of an adapter's hooks: set stores the function the option was given
// in H. isNil reports whether that function is nil, in which case the
// option fails instead, with an error that names it and wraps
// [ErrNilFunc]:
//
//	func WithSkip(skip func(*http.Request) bool) Option {
//		return adapter.WithHook("WithSkip", skip == nil, func(h *hooks) { h.skip = skip })
//	}
func WithHook[H any](name string, isNil bool, set func(*H)) Option[H] {
	return func(s *Settings[H]) error {
		if isNil {
			return fmt.Errorf("%s: %w", name, ErrNilFunc)
		}
		set(&s.Hooks)
		return nil
	}
}

// Build applies opts ([Apply]) and makes the Middleware from l, rules and
// the options' Config ([New]): what an adapter's constructor does before
// it makes its handler. fn names that constructor, such as
// "ginlimit.New": every error Build returns starts with it. It returns the
// Middleware and the hooks the options set.
func Build[H any](fn string, l *core.Limiter, rules []core.Rule, opts []Option[H]) (*Middleware, H, error) {
	s, err := Apply(fn, opts)
	if err != nil {
		return nil, s.Hooks, err
	}
	m, err := newMiddleware(l, rules, s.Config)
	if err != nil {
		return nil, s.Hooks, fmt.Errorf("%s: %w", fn, err)
	}
	return m, s.Hooks, nil
}
