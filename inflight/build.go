package inflight

import (
	"fmt"

	"github.com/ratekit/ratekit/core/adapter"
)

// BuildGuard applies opts ([adapter.Apply]) and makes the Guard from l,
// rule and the options' Config ([NewGuard]): what an adapter's
// concurrency middleware does before it makes its handler, as
// [adapter.Build] is for its rate middleware. fn names the adapter's
// constructor, such as "ginlimit.InFlight": every error BuildGuard returns
// starts with it. It returns the Guard and the hooks the options set.
func BuildGuard[H any](fn string, l *Limiter, rule Rule, opts []adapter.Option[H]) (*Guard, H, error) {
	s, err := adapter.Apply(fn, opts)
	if err != nil {
		return nil, s.Hooks, err
	}
	g, err := newGuard(l, rule, s.Config)
	if err != nil {
		return nil, s.Hooks, fmt.Errorf("%s: %w", fn, err)
	}
	return g, s.Hooks, nil
}
