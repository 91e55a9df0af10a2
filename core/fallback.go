package core

import (
	"time"

	"github.com/ratekit/ratekit/internal/localstore"
)

// This file holds the Limiter's side of its local fallback under
// FailLocal: an in-process store (package internal/localstore, the engine
// of package memorystore too) that decides each check under the limit, or
// this replica's share of it (WithReplicas).

// allowLocal decides checks at cost n with the fallback store into
// results, each Result's Limit the limit applied.
func (l *Limiter) allowLocal(checks []Check, n int, results []Result) {
	var (
		cbuf [8]localstore.Check
		rbuf [8]localstore.Result
	)
	local, out := l.localChecks(checks, cbuf[:0]), rbuf[:0]
	if len(checks) > len(rbuf) {
		out = make([]localstore.Result, len(checks))
	}
	out = out[:len(checks)]
	l.fallbackStore.Allow(local, n, out)
	for i, r := range out {
		results[i] = Result{Limit: l.localLimit(checks[i].Limit), Allowed: r.Allowed, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
	}
}

// refundLocal gives n units back to key in the fallback store, spent
// under lim, this replica's share of a limit (the limit of the fallback's
// Result), as long as they still count: left is what remains of their
// ResetAfter.
func (l *Limiter) refundLocal(key string, lim Limit, n int, left time.Duration) {
	var out [1]localstore.Result
	c := localstore.Check{Key: key, ResetAfter: left, Limit: localstore.Limit{
		Rate: lim.Rate, Period: lim.Period, Burst: lim.Burst, Algorithm: localstore.Algorithm(lim.Algorithm),
	}}
	l.fallbackStore.Refund([]localstore.Check{c}, n, out[:])
}

// localChecks returns checks as the fallback store takes them, appended to
// buf: each under this replica's share of its limit, without overrides.
func (l *Limiter) localChecks(checks []Check, buf []localstore.Check) []localstore.Check {
	for _, c := range checks {
		lim := l.localLimit(c.Limit)
		buf = append(buf, localstore.Check{Key: c.Key, Limit: localstore.Limit{
			Rate: lim.Rate, Period: lim.Period, Burst: lim.Burst, Algorithm: localstore.Algorithm(lim.Algorithm),
		}})
	}
	return buf
}
