package inflight

import "github.com/ratekit/ratekit/core/adapter"

// BuildGuard applies opts ([adapter.Apply], with pkg naming the adapter in
// errors) and makes the Guard from l, rule and the options' Config
// ([NewGuard]): what an adapter's concurrency middleware does before it
// makes its handler, as [adapter.Build] is for its rate middleware. It
// returns the Guard and the hooks the options set.
func BuildGuard[H any](pkg string, l *Limiter, rule Rule, opts []adapter.Option[H]) (*Guard, H, error) {
	s, err := adapter.Apply(pkg, opts)
	if err != nil {
		return nil, s.Hooks, err
	}
	g, err := NewGuard(l, rule, s.Config)
	return g, s.Hooks, err
}
