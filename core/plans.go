package core

import (
	"fmt"
	"maps"
)

// PlanLimits returns a [Rule.LimitOf] that picks a request's limit by its
// plan: plan names the request's plan (such as a verified token's claim,
// or "" when it has none), and limits maps each plan to its limit. A plan
// that limits does not name gets the rule's default [Rule.Limit], never
// no limit. It returns an error wrapping [ErrInvalidLimit] for a nil plan
// function and for a limit that fails [Limit.Validate], naming its plan.
// The table is copied.
func PlanLimits(plan func(Request) string, limits map[string]Limit) (func(Request) (Limit, bool), error) {
	if plan == nil {
		return nil, fmt.Errorf("%w: PlanLimits: nil plan function", ErrInvalidLimit)
	}
	for name, lim := range limits {
		if err := lim.Validate(); err != nil {
			return nil, fmt.Errorf("plan %q: %w", name, err)
		}
	}
	limits = maps.Clone(limits)
	return func(req Request) (Limit, bool) {
		lim, ok := limits[plan(req)]
		return lim, ok
	}, nil
}
