package keyfuncs

import (
	"fmt"
	"maps"

	"github.com/ratekit/ratekit/core"
)

// PlanLimits returns a [core.Rule.LimitOf] that picks a request's limit by its
// plan: plan names the request's plan (such as a verified token's claim,
// or "" when it has none), and limits maps each plan to its limit. A plan
// that limits does not name gets the rule's default [core.Rule.Limit], never
// no limit. It returns an error wrapping [core.ErrInvalidLimit] for a nil plan
// function and for a limit that fails [core.Limit.Validate], naming its plan.
// The table is copied.
func PlanLimits(plan func(core.Request) string, limits map[string]core.Limit) (func(core.Request) (core.Limit, bool), error) {
	if plan == nil {
		return nil, fmt.Errorf("%w: PlanLimits: nil plan function", core.ErrInvalidLimit)
	}
	for name, lim := range limits {
		if err := lim.Validate(); err != nil {
			return nil, fmt.Errorf("plan %q: %w", name, err)
		}
	}
	limits = maps.Clone(limits)
	return func(req core.Request) (core.Limit, bool) {
		lim, ok := limits[plan(req)]
		return lim, ok
	}, nil
}
