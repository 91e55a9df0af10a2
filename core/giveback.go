package core

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// refundDenied gives back what the rules of p's groups below upto spent, the
// request having been denied: a denied request spends nothing under any
// of its rules, though the Limiter decides its identities one after the
// other and a later identity's denial comes after an earlier one spent.
// It runs within the decision, on the caller's goroutine, its store calls
// (one per group that the store spent for, the group's keys sharing a
// slot) within one Limiter deadline, kept even when the caller gives up:
// a decision costs at most one deadline more on a denial, and nothing more
// when allowed. Units the fallback store spent go back to it; a store call
// that missed its deadline gives back once it returns, as [Limiter.Refund]
// does. A refund that fails counts as a failed store call (the breaker,
// [OnError], the logger and the Observer's StoreCalled hear of it) and
// leaves its units spent until they refill. An open breaker, or a store
// that is no [QuotaStore], gives nothing back to the store. Each result is
// marked refunded, so a later Refund of the decision gives nothing twice.
func (l *Limiter) refundDenied(ctx context.Context, p *plan, d *Decision, upto int) {
	var (
		cbuf [stackRules]Check
		dl   deadline // one for every group's refund, made when first needed
	)
	defer dl.end()
	for g := 0; g < upto; g++ {
		checks, n := cbuf[:0], 0
		for i := range p.rules {
			if p.rules[i].group != g {
				continue
			}
			r := &d.Results[i]
			if r.spent == spentNothing && r.late == nil || !atomic.CompareAndSwapUint32(&r.refunded, 0, 1) {
				continue
			}
			if r.late != nil {
				l.refundLate(r.late, int(r.check))
			}
			left := time.Duration(r.until - l.mono())
			switch {
			case left <= 0:
			case r.spent == spentFallback:
				l.refundLocal(r.key, r.Limit, int(r.cost), left)
			case r.spent == spentStore:
				checks, n = append(checks, Check{Key: r.key, Limit: r.Limit, ResetAfter: left}), int(r.cost)
			}
		}
		if len(checks) == 0 {
			continue
		}
		qs, ok := l.store.(QuotaStore)
		if !ok || !l.brk.closed() && l.shardOpen(checks[0].Key) {
			continue
		}
		l.refundGroup(dl.of(context.WithoutCancel(ctx), l.timeout), qs, checks, n)
	}
}

// refundGroup gives n units back to checks, all of one identity, in the
// store, within ctx, and reports how it went as a decision's store call.
func (l *Limiter) refundGroup(ctx context.Context, qs QuotaStore, checks []Check, n int) {
	for _, c := range checks {
		l.denied.forget(c.Key)
	}
	t0 := l.mono()
	err := l.quotaCall(ctx, func(ctx context.Context) error {
		_, err := qs.RefundAllN(ctx, checks, n)
		return err
	})
	for _, c := range checks {
		l.denied.forget(c.Key) // see forgetAround
	}
	if err != nil && ctx.Err() != nil {
		err = l.timeoutErr
	}
	if l.observer != nil {
		l.observer.StoreCalled(time.Duration(l.mono()-t0), err)
	}
	if l.inProcess {
		return
	}
	switch {
	case err == nil:
		l.succeeded(checks[0].Key)
	case keyError(err):
		l.report(fmt.Errorf("ratekit: giving back what a denied request spent: %w", err))
	default:
		l.failed(fmt.Errorf("ratekit: giving back what a denied request spent: %w", err), checks[0].Key)
	}
}
