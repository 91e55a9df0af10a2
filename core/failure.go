package core

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// FailurePolicy says how a [Limiter] decides when its store cannot: when a
// call fails or misses its deadline, or while the circuit breaker is open.
// The zero value is [FailLocal].
//
// Whatever the policy, every result decided without the store has Degraded
// set, so the outage is visible in each [Decision].
type FailurePolicy uint8

const (
	// FailLocal decides with an in-process store (the engine of package memorystore): the same rules
	// and algorithms, counted per instance. Limiting goes on through the
	// outage, at the cost of each replica counting alone: N replicas let up
	// to N times the limit through, unless [WithReplicas] divides it. The
	// default.
	FailLocal FailurePolicy = iota
	// FailOpen allows every request. Nothing is limited during the outage,
	// and nothing is refused because of it.
	FailOpen
	// FailClosed denies every request: [Limiter.Check] returns a decision
	// with Allowed false, each result with a RetryAfter of at least one
	// second (until the breaker's next probe, when it is open), and an
	// error wrapping [ErrUnavailable] and the store's error. Adapters answer
	// 503 with Retry-After. Nothing passes that the limit might have
	// refused, and nothing passes at all.
	FailClosed

	numFailurePolicies = iota
)

var failurePolicyNames = [numFailurePolicies]string{"local", "open", "closed"}

// String returns "local", "open" or "closed".
func (p FailurePolicy) String() string {
	if p < numFailurePolicies {
		return failurePolicyNames[p]
	}
	return "failure-policy(" + strconv.Itoa(int(p)) + ")"
}

// ParseFailurePolicy returns the policy named s, as printed by
// [FailurePolicy.String]: "local", "open" or "closed". Matching ignores
// case.
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	for i, name := range failurePolicyNames {
		if strings.EqualFold(s, name) {
			return FailurePolicy(i), nil
		}
	}
	return 0, fmt.Errorf("ratekit: unknown failure policy %q (want local, open or closed)", s)
}

// fallback decides c without the store, by the failure policy, into
// c.results. cause is the store's error, or nil when the breaker is open
// and the store was not called.
func (l *Limiter) fallback(ctx context.Context, c *groupCall, cause error) error {
	switch l.policy {
	case FailOpen:
		for i, ch := range c.checks {
			c.results[i] = Result{Limit: ch.Limit, Allowed: true, Remaining: max(0, ch.Limit.Capacity()-c.n), Degraded: true}
		}
		return nil
	case FailClosed:
		retry := l.brk.retryAfter(l.mono())
		for i, ch := range c.checks {
			c.results[i] = Result{Limit: ch.Limit, RetryAfter: retry, ResetAfter: retry, Degraded: true}
		}
		if cause == nil {
			return l.brk.openError()
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, cause)
	}
	l.allowLocal(c.checks, c.n, c.results)
	c.spent, c.from = spentFallback, l.mono()
	for i := range c.results {
		c.results[i].Degraded = true
		if c.results[i].Never() && c.n <= c.checks[i].Limit.Capacity() {
			// the cost fits the global limit, only not this replica's
			// share of it: it may pass once the store is back
			retry := l.brk.retryAfter(l.mono())
			c.results[i].RetryAfter = retry
			c.results[i].ResetAfter = max(c.results[i].ResetAfter, retry)
		}
	}
	return nil
}

// localLimit divides lim for one of the expected replicas: rate and burst
// divided, rounding up. A limit the division would make invalid is kept
// whole.
func (l *Limiter) localLimit(lim Limit) Limit {
	if l.replicas <= 1 {
		return lim
	}
	div := lim
	div.Rate = (lim.Rate + l.replicas - 1) / l.replicas
	div.Burst = (lim.Burst + l.replicas - 1) / l.replicas
	if div.Validate() != nil {
		return lim
	}
	return div
}
