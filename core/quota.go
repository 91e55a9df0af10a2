package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratekit/internal/storekey"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// ErrNotSupported is returned, wrapped, when a store lacks what a call
// needs: a [Limiter.Peek], [Limiter.Refund] or [Limiter.Reset] over a
// store that is no [QuotaStore], a leasestore.Store over a store that is no
// [QuotaStore], or reset watching over a Redis client
// without pub/sub.
var ErrNotSupported = errors.New("ratekit: not supported by the store")

// Peek reports what rule would answer a request of one unit from identity
// now, without spending anything: whether a unit is left, how many
// remain, the wait until one fits and the time until the quota is full
// again. It reads the rule's [Rule.Limit] (a per-request [Rule.LimitOf]
// needs a request: peek such a rule with the limit in question as its
// Limit), or identity's override when the rule takes overrides
// ([Rule.Overrides]) and the store holds one: the result's Limit says
// which. The call has the Limiter's deadline; a store that fails or
// misses it makes Peek return its error, since no failure policy can tell
// what the store holds. It returns an error wrapping [ErrNotSupported]
// when the store is no [QuotaStore].
//
// Peek asks the store once, with one script call on Redis, and answers
// a denial the denied-key cache remembers without asking.
func (l *Limiter) Peek(ctx context.Context, rule Rule, identity string) (Result, error) {
	if err := validateRule(&rule); err != nil {
		return Result{}, err
	}
	k, err := l.storageKey(rule.Name, identity)
	if err != nil {
		return Result{}, err
	}
	qs, ok := l.store.(QuotaStore)
	if !ok {
		return Result{}, fmt.Errorf("%w: Peek: %T is no QuotaStore", ErrNotSupported, l.store)
	}
	checks := []Check{{Key: k, Limit: rule.Limit}}
	if rule.Overrides {
		checks[0].Override = k + storekey.OverrideSuffix
	}
	var res []Result
	err = l.quotaCall(ctx, func(ctx context.Context) (err error) {
		res, err = qs.PeekAll(ctx, checks)
		return err
	})
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: %d results for 1 check", ErrMalformedReply, len(res))
	}
	if err != nil {
		return Result{}, fmt.Errorf("ratekit: Peek: %w", err)
	}
	return res[0], nil
}

// Refund gives back what decision d spent under the named rules, or under
// every rule of d when none is named: units that the caller chooses not
// to count after all, such as the reserved unit of a login attempt that
// succeeded. A rule whose result spent nothing (a denial, a denial the
// denied-key cache answered) gives nothing back; units the fallback store
// spent go back to it. A key never holds more than its capacity.
//
// Each result is refunded at most once: a second Refund of it, from d or
// any copy of d (copies share d.Results), gives nothing back, and of
// concurrent Refunds of one result exactly one does. Refund marks the
// results it refunds in d.Results, so it must not run beside other
// reads or writes of those results than Refunds; a copy of the results
// themselves (slices.Clone(d.Results)) is refunded apart from them.
//
// Only what still counts goes back. Once a result's ResetAfter has
// passed since its answer came, its units have refilled (GCRA), its fixed
// window is over, its sliding-log members have left the window, its
// sliding-counter window weighs no more: nothing goes back. Before that,
// the store is told what is left of the ResetAfter ([Check].ResetAfter)
// and gives back to the spend it names: to the fixed window the units
// were spent in and never a later one, to the sliding counter's count of
// that window, the sliding log's members of that instant, and GCRA's
// units whole. The time left is measured on this Limiter's clock from
// when the store was asked, not from its answer: the store spent a little
// after the asking (the decision's delay) and reads the refund a little
// after it is made (the refund's), two delays that offset each other, and
// it takes the bound as good within a quarter of the period (at least
// 2 ms). A refund made within the decision's delay of the spend's end
// gives back nothing. A fixed window's or sliding counter's refund goes
// to the spend's own window while the decision's delay exceeds the
// refund's by less than a quarter of the period and the refund's exceeds
// the decision's by less than three quarters; past that a fixed window's
// gives back nothing (the decision's the longer) or to the next window,
// and a sliding counter's to the window before the spend's or after it,
// at most the result's cost. A sliding log may take another decision's
// units instead when they were admitted within twice the difference of
// the two delays of the ones refunded, which frees their slot that much
// sooner. A GCRA refund gives back the whole cost until the ResetAfter
// has passed, though part of it may have refilled already.
//
// A decision whose store call missed its deadline was decided by the
// failure policy, while the store may well have run the call too: under
// [FailLocal] both spent, and Refund gives back to both; under [FailOpen]
// only the store may have, and gets its units back. When the store is
// called on a goroutine of its own (a client without
// ContextTimeoutEnabled), the call goes on past the deadline and tells
// whether it spent: its units go back once it has returned, exactly what
// it spent, none when it denied (when it failed, as if it could not
// tell, below). When the store keeps deadlines
// (ContextTimeoutEnabled), a call cut at its deadline never tells: its
// units go back to the store as if it had spent them in the window current
// when it was sent, unless it failed in a way that spends nothing (an
// error reply of Redis, a refused connection, a closed client, a call the
// store never sent: [ErrNotSent], as of a batching redisstore.Store's
// call still queued for a pipeline at its deadline). That
// gives back up to the result's cost too many when the call never ran (a
// command lost on its way), never past the key's capacity. These refunds
// in the store run in the background with ten times the Limiter's
// deadline ([WithTimeout]), report their errors to the logger and
// [OnError], and [Limiter.Close] waits for them; one that fails leaves its
// units spent until they refill.
//
// Refund makes one store call per rule that the store spent in time, each
// with the Limiter's deadline, and returns the first error, which it also
// reports like a failed decision's ([OnError], the logger): the units of a
// failed refund stay spent, though a refund that misses its deadline may
// still run. It returns an error wrapping [ErrNotSupported] when a rule's
// units went to a store that is no [QuotaStore], and ctx's error, having
// given back nothing, when ctx is done. A denial that another replica's
// denied-key cache remembers stands until its retry-after; this Limiter's
// own forgets the refunded key.
func (l *Limiter) Refund(ctx context.Context, d Decision, rules ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ratekit: Refund: %w", err)
	}
	for i := range d.Results {
		r := &d.Results[i]
		if r.spent == spentNothing && r.late == nil || (len(rules) > 0 && !slices.Contains(rules, r.Rule)) {
			continue
		}
		if !atomic.CompareAndSwapUint32(&r.refunded, 0, 1) {
			continue // refunded already
		}
		if err := l.refund(ctx, r); err != nil {
			return fmt.Errorf("ratekit: Refund %q: %w", r.Rule, err)
		}
	}
	return nil
}

// refund gives back what r spent, to the store that spent it, and what
// the store may have spent of a call that missed its deadline.
func (l *Limiter) refund(ctx context.Context, r *RuleResult) error {
	if r.late != nil {
		l.refundLate(r.late, int(r.check))
	}
	left := time.Duration(r.until - l.mono())
	switch r.spent {
	case spentNothing:
		return nil
	case spentFallback:
		if left > 0 {
			l.refundLocal(r.key, r.Limit, int(r.cost), left)
		}
		return nil
	}
	qs, ok := l.store.(QuotaStore)
	if !ok {
		return fmt.Errorf("%w: %T is no QuotaStore", ErrNotSupported, l.store)
	}
	if left <= 0 {
		return nil // what it spent counts no longer
	}
	l.denied.forget(r.key)
	check := []Check{{Key: r.key, Limit: r.Limit, ResetAfter: left}}
	err := l.quotaCall(ctx, func(ctx context.Context) error {
		_, err := qs.RefundAllN(ctx, check, int(r.cost))
		return err
	})
	l.denied.forget(r.key) // and a denial decided before the refund landed (see forgetAround)
	if err != nil && tickctx.Expired(ctx) == nil {
		l.report(err)
	}
	return err
}

// refundLate gives back, in the store, what check i of the call c, which
// missed its deadline, spent or may have spent: in the background once c
// has returned, else on c's goroutine when it returns.
func (l *Limiter) refundLate(c *storeCall, i int) {
	c.mu.Lock()
	if !c.ended {
		c.refunds = append(c.refunds, i)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		l.refundStore(c, []int{i})
		return
	}
	l.wg.Add(1)
	l.mu.RUnlock()
	go func() {
		defer l.wg.Done()
		l.refundStore(c, []int{i})
	}()
}

// refundStore gives back to the store what the ended call c spent of the
// checks at idx, or may have spent when its outcome is unknown, with ten
// times the Limiter's deadline; it reports its error.
func (l *Limiter) refundStore(c *storeCall, idx []int) {
	qs, ok := l.store.(QuotaStore)
	if !ok {
		return // Refund reports this of the decision's own units
	}
	checks := c.refundable(idx, l.mono())
	if len(checks) == 0 {
		return
	}
	for _, ch := range checks {
		l.denied.forget(ch.Key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lateRefundDeadlines*l.timeout)
	defer cancel()
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = storePanicked(p)
			}
		}()
		_, err = qs.RefundAllN(ctx, checks, c.n)
		return err
	}()
	for _, ch := range checks {
		l.denied.forget(ch.Key) // see forgetAround
	}
	if err != nil {
		l.report(fmt.Errorf("ratekit: refund of a decision whose store call missed its deadline: %w", err))
	}
}

// lateRefundDeadlines is how many of the Limiter's deadlines a refund in
// the background of a call that missed its deadline has: enough to dial
// and send through the latency that made the call late.
const lateRefundDeadlines = 10

// refundable returns the checks at idx of the ended call c that spent, or
// may have spent, at now: each with what is left of its spend's
// ResetAfter, and none whose spend counts no longer. When c answered, a
// check spent if it was allowed, under the limit it answered with (an
// override's, when one applied); when c failed in a way that may have
// spent, each check may have spent when c was sent, under its own limit.
func (c *storeCall) refundable(idx []int, now int64) []Check {
	answered := c.err == nil && len(c.results) == len(c.checks)
	if !answered && !mayHaveSpent(c.err) {
		return nil
	}
	var out []Check
	for _, i := range idx {
		ch := c.checks[i]
		var until int64
		if answered {
			r := c.results[i]
			if !r.Allowed {
				continue // the store spent nothing
			}
			ch.Limit, ch.Override = r.Limit, ""
			until = c.sent + int64(r.ResetAfter)
		} else {
			// an override's limit is read by the store: no bound
			if ch.Override == "" {
				until = c.sent + int64(ch.Limit.longestReset())
			}
		}
		if until != 0 {
			if until <= now {
				continue
			}
			ch.ResetAfter = time.Duration(until - now)
		}
		out = append(out, ch)
	}
	return out
}

// Reset clears what identity spent under the named rule, in the store and
// in this Limiter's memory (its denied-key cache and fallback state), so
// that its next request finds the quota full. Over a store that tells of
// resets ([QuotaStore].WatchResets), as package redisstore does through
// Redis pub/sub, every other Limiter that watches the store forgets the
// key too as soon as the message reaches it (milliseconds, while its
// subscription is connected). Each time such a subscription is made again
// after a loss, its Limiter forgets every denial it remembers, since
// resets may have gone unheard meanwhile; a reset published before a
// Limiter's subscription is first in place, a moment after NewLimiter,
// may be missed. The store call has the Limiter's deadline. It returns an
// error wrapping [ErrNotSupported] when the store is no [QuotaStore]; the
// local state is cleared whatever the store answers.
func (l *Limiter) Reset(ctx context.Context, rule, identity string) error {
	k, err := l.storageKey(rule, identity)
	if err != nil {
		return err
	}
	qs, ok := l.store.(QuotaStore)
	if !ok {
		l.forget(k)
		return fmt.Errorf("%w: Reset: %T is no QuotaStore", ErrNotSupported, l.store)
	}
	err = l.forgetAround(k, func() error {
		return l.quotaCall(ctx, func(ctx context.Context) error { return qs.Reset(ctx, k) })
	})
	if err != nil {
		return fmt.Errorf("ratekit: Reset: %w", err)
	}
	return nil
}

// forgetAround runs f, a store call that frees key, between two forgets
// of key. The first clears the fallback state and the cache whatever the
// store answers; the second, once the change has landed, drops a denial
// that a decision made before it brings back: such a decision may have
// read the cache's generation after the first forget (see
// deniedCache.record), and only a forget after its answer was decided
// tells record to drop it.
func (l *Limiter) forgetAround(key string, f func() error) error {
	l.forget(key)
	err := f()
	l.forget(key)
	return err
}

// forget drops what the Limiter remembers of key: a denial in the
// denied-key cache and the fallback store's state. The empty key, which
// a store's WatchResets sends when it may have missed resets, drops every
// denial: the cache is only a short-cut to what the store would answer.
// The fallback's state stays, as it does when a reset fails with the
// store unreachable.
func (l *Limiter) forget(key string) {
	if key == "" {
		l.denied.clear()
		return
	}
	l.denied.forget(key)
	if l.fallbackStore != nil {
		l.fallbackStore.Reset(key)
	}
}

// quotaCall runs f, a call of the store, within the Limiter's deadline,
// whatever the store does: on the caller's goroutine when the store keeps
// deadlines or decides in process, else on a goroutine of its own that
// the caller abandons at the deadline (Close waits for it). A store that
// keeps deadlines gets the pooled deadline of a decision's call (see
// package tickctx), which spares a refund per request, as a count-only rule
// makes, a context and a timer of its own; as with a decision, a caller
// that gives up meanwhile sees the call end by that deadline at the
// latest, unless its own deadline comes first.
func (l *Limiter) quotaCall(ctx context.Context, f func(context.Context) error) error {
	if l.inProcess {
		return f(ctx)
	}
	if l.direct {
		dl := deadline{bounds: &l.bounds}
		defer dl.end()
		return f(dl.of(ctx, l.timeout))
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return f(ctx)
	}
	l.wg.Add(1)
	l.mu.RUnlock()
	done := make(chan error, 1)
	go func() {
		defer l.wg.Done()
		done <- f(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchResets makes the Limiter forget each key reset through another
// process, when the store tells of resets.
func (l *Limiter) watchResets() {
	w, ok := l.store.(QuotaStore)
	if !ok {
		return
	}
	var (
		stop func()
		err  error
	)
	if r, ok := w.(ResetWatchReporter); ok {
		stop, err = r.WatchResetsReporting(l.forget, func(err error) {
			l.report(fmt.Errorf("ratekit: resets made through other replicas will not clear this one's memory: %w", err))
		})
	} else {
		stop, err = w.WatchResets(l.forget)
	}
	if err != nil {
		if l.logger != nil {
			l.logger.LogAttrs(context.Background(), slog.LevelWarn,
				"ratekit: resets made through other replicas will not clear this one's memory", slog.String("error", err.Error()))
		}
		return
	}
	l.stopWatch = stop
}
