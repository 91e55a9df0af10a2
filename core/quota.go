package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/ratekit/ratekit/internal/storekey"
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
// denied-key cache answered, an allowance under [FailOpen]) gives nothing
// back; units the fallback store spent go back to it. A key never holds
// more than its capacity.
//
// Refund makes one store call per rule that spent, each with the
// Limiter's deadline, and returns the first error, which it also reports
// like a failed decision's ([OnError], the logger): the units of a
// failed refund stay spent. It returns an error wrapping [ErrNotSupported] when
// a rule's units went to a store that is no [QuotaStore]. A denial that
// another replica's denied-key cache remembers stands until its
// retry-after; this Limiter's own forgets the refunded key.
func (l *Limiter) Refund(ctx context.Context, d Decision, rules ...string) error {
	for i := range d.Results {
		r := &d.Results[i]
		if r.spent == spentNothing || (len(rules) > 0 && !slices.Contains(rules, r.Rule)) {
			continue
		}
		if err := l.refund(ctx, r); err != nil {
			return fmt.Errorf("ratekit: Refund %q: %w", r.Rule, err)
		}
	}
	return nil
}

// refund gives back what r spent, to the store that spent it.
func (l *Limiter) refund(ctx context.Context, r *RuleResult) error {
	check := []Check{{Key: r.key, Limit: r.Limit}}
	if r.spent == spentFallback {
		l.refundLocal(check[0], int(r.cost))
		return nil
	}
	qs, ok := l.store.(QuotaStore)
	if !ok {
		return fmt.Errorf("%w: %T is no QuotaStore", ErrNotSupported, l.store)
	}
	l.denied.forget(r.key)
	err := l.quotaCall(ctx, func(ctx context.Context) error {
		_, err := qs.RefundAllN(ctx, check, int(r.cost))
		return err
	})
	if err != nil && ctx.Err() == nil {
		l.report(err)
	}
	return err
}

// Reset clears what identity spent under the named rule, in the store and
// in this Limiter's memory (its denied-key cache and fallback state), so
// that its next request finds the quota full. Over a store that tells of
// resets ([QuotaStore].WatchResets), as package redisstore does through Redis pub/sub,
// every other Limiter that watches the store forgets the key too as soon
// as the message reaches it (milliseconds, while its subscription is
// connected). The store call has the Limiter's deadline. It returns an
// error wrapping [ErrNotSupported] when the store is no [QuotaStore]; the
// local state is cleared whatever the store answers.
func (l *Limiter) Reset(ctx context.Context, rule, identity string) error {
	k, err := l.storageKey(rule, identity)
	if err != nil {
		return err
	}
	l.forget(k)
	qs, ok := l.store.(QuotaStore)
	if !ok {
		return fmt.Errorf("%w: Reset: %T is no QuotaStore", ErrNotSupported, l.store)
	}
	err = l.quotaCall(ctx, func(ctx context.Context) error { return qs.Reset(ctx, k) })
	if err != nil {
		return fmt.Errorf("ratekit: Reset: %w", err)
	}
	return nil
}

// forget drops what the Limiter remembers of key: a denial in the
// denied-key cache and the fallback store's state.
func (l *Limiter) forget(key string) {
	l.denied.forget(key)
	if l.fallbackStore != nil {
		l.fallbackStore.Reset(key)
	}
}

// quotaCall runs f, a call of the store, within the Limiter's deadline,
// whatever the store does: on the caller's goroutine when the store keeps
// deadlines or decides in process, else on a goroutine of its own that
// the caller abandons at the deadline (Close waits for it).
func (l *Limiter) quotaCall(ctx context.Context, f func(context.Context) error) error {
	if l.inProcess {
		return f(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if l.direct {
		return f(ctx)
	}
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
	stop, err := w.WatchResets(l.forget)
	if err != nil {
		if l.logger != nil {
			l.logger.LogAttrs(context.Background(), slog.LevelWarn,
				"ratekit: resets made through other replicas will not clear this one's memory", slog.String("error", err.Error()))
		}
		return
	}
	l.stopWatch = stop
}
