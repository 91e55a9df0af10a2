package core

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratekit/internal/localstore"
	"github.com/ratekit/ratekit/internal/storekey"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// MaxDebtPeriods bounds the debt a charge may leave a key in
// ([Limiter.Charge]), in periods of its limit: a key never owes more than
// MaxDebtPeriods × Rate units beyond its capacity, so one huge charge
// keeps it denied for at most about MaxDebtPeriods periods (GCRA), and a
// charge past the bound spends only what fits, which its [ChargeResult]
// reports. The window algorithms forgive sooner: a fixed window's debt
// goes when its window ends, a sliding log's members leave within a
// period (a log holds at most twice its rate), and a sliding counter's
// count weighs on the next window only.
//
// Ten periods keep a budget meaningful against a caller whose answers
// cost far more than the budget (a 100-token-a-minute key charged 5,000
// tokens waits ten minutes, not fifty) while a key, however overdrawn,
// recovers on its own within a bounded time.
const MaxDebtPeriods = 10

// MaxCharge is the most units one charge spends: far beyond what any key
// can take (capacity + [MaxDebtPeriods] × rate), so that a larger n, once
// clamped to it, spends the same.
const MaxCharge = 1 << 40

// ChargeResult is what a charge spent from one key, and how the key
// stands after it.
type ChargeResult struct {
	// Rule is the rule's name.
	Rule string
	// Result is what [Limiter.Peek] would answer after the charge: a key
	// in debt has Allowed false, Remaining 0, and a RetryAfter until the
	// debt is repaid and one unit fits.
	Result
	// Charged is how many of the units asked for the key was charged, an
	// up-front spend of the decision included ([Limiter.ChargeDecision]):
	// fewer when the debt bound ([MaxDebtPeriods]) clamped the charge, 0
	// when a failure policy other than [FailLocal] charged nothing.
	Charged int
}

// ChargeStore is a [Store] that can spend units whatever a key holds, what
// [Limiter.Charge] and [Limiter.ChargeDecision] need. The stores of
// packages redisstore and memorystore implement it, and leasestore's over
// one of them; the conformance suite (package core/storetest) proves it. A
// wrapper over a store that cannot charge answers an error wrapping
// [ErrNotSupported], which the Limiter returns as it is.
type ChargeStore interface {
	Store
	// ChargeAllN spends n units (at least 1) from each check's key, each
	// on its own, whatever it holds: a key that runs out goes into debt
	// in its algorithm's terms, bounded by [MaxDebtPeriods], and a later
	// call is denied until the debt is repaid. The results follow the order
	// of checks: each the units the key took and what
	// [QuotaStore.PeekAll] would answer after the charge. A sliding log's
	// charge may pass [MaxLogCost].
	ChargeAllN(ctx context.Context, checks []Check, n int) ([]ChargeResult, error)
}

// Charge spends n units of rule from identity whatever it has left: the
// cost of an answer known only once it is done, such as the tokens a
// language model streamed. A key that runs out goes into debt, and rule's
// next decisions for identity are denied, with a RetryAfter until the
// debt is repaid and the request's cost fits, on the store's clock. Debt
// is bounded ([MaxDebtPeriods]): a charge past the bound spends what fits,
// and the result's Charged says how much that was. It reads the rule's
// Limit, or identity's override when the rule takes overrides, as
// [Limiter.Peek] does.
//
// Over Redis a charge is one script call, atomic on Redis's clock, and
// exact across processes. When the store fails (or its breaker is open),
// the failure policy decides: under [FailLocal] the fallback store is
// charged, under [FailOpen] nothing is, and under [FailClosed] Charge
// returns an error wrapping [ErrUnavailable]; the failure is reported as a
// decision's is ([Observer].StoreCalled, [OnError], the logger), and the
// result is Degraded. A charge whose call missed its deadline may have
// landed in the store as well.
//
// n below 0 is an error wrapping [ErrInvalidCost]; a charge of 0 spends
// nothing and reports the key as Peek does. It returns an error wrapping
// [ErrNotSupported] when the store is no [ChargeStore].
func (l *Limiter) Charge(ctx context.Context, rule Rule, identity string, n int) (ChargeResult, error) {
	if n < 0 {
		return ChargeResult{}, fmt.Errorf("ratekit: Charge: %w: %d units", ErrInvalidCost, n)
	}
	if err := validateRule(&rule); err != nil {
		return ChargeResult{}, err
	}
	if n == 0 {
		r, err := l.Peek(ctx, rule, identity)
		return ChargeResult{Rule: rule.Name, Result: r}, err
	}
	k, err := l.storageKey(rule.Name, identity)
	if err != nil {
		return ChargeResult{}, err
	}
	c := Check{Key: k, Limit: rule.Limit}
	if rule.Overrides {
		c.Override = k + storekey.OverrideSuffix
	}
	r, err := l.chargeStore(ctx, c, n)
	r.Rule = rule.Name
	return r, err
}

// ChargeDecision charges n units under each rule of d (the named ones, or
// all), as [Limiter.Charge] does, to what the decision spent up front: the
// cost the decision spent is part of n, not added to it. A rule whose
// decision spent c units is charged n − c more, or given back c − n when
// the answer cost less (as [Limiter.Refund] gives back, while they still
// count). This is how a rule admits requests while its key is not in debt
// and charges what they cost once answered: the rule's [Rule.Cost] (1 by
// default) is the least a key must have left to be admitted, spent at
// once.
//
// A rule that denied is not charged. The up-front spend of each result is
// settled once: a second ChargeDecision of it, from d or a copy, charges n
// whole, and a [Limiter.Refund] after a charge gives nothing back. Units
// the fallback store spent up front are charged to it. It returns the
// results of the rules charged, in d's order, and the first error.
func (l *Limiter) ChargeDecision(ctx context.Context, d Decision, n int, rules ...string) ([]ChargeResult, error) {
	if n < 0 {
		return nil, fmt.Errorf("ratekit: ChargeDecision: %w: %d units", ErrInvalidCost, n)
	}
	var out []ChargeResult
	for i := range d.Results {
		r := &d.Results[i]
		if !r.Allowed && !r.Shadow || len(rules) > 0 && !contains(rules, r.Rule) {
			continue
		}
		upfront := 0
		if r.spent != spentNothing && atomic.CompareAndSwapUint32(&r.refunded, 0, 1) {
			upfront = int(r.cost)
		}
		res := ChargeResult{Rule: r.Rule, Result: r.Result, Charged: n}
		var err error
		switch delta := n - upfront; {
		case delta > 0 && r.spent == spentFallback:
			res = l.chargeLocal(Check{Key: r.key, Limit: r.Limit}, delta, false)
			res.Charged += upfront
		case delta > 0:
			res, err = l.chargeStore(ctx, Check{Key: r.key, Limit: r.Limit}, delta)
			res.Charged += upfront
		case delta < 0:
			err = l.giveBack(ctx, r, -delta)
		}
		res.Rule = r.Rule
		out = append(out, res)
		if err != nil {
			return out, fmt.Errorf("ratekit: ChargeDecision %q: %w", r.Rule, err)
		}
	}
	return out, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// giveBack returns n of the units r spent up front, to the store that
// spent them, while they still count.
func (l *Limiter) giveBack(ctx context.Context, r *RuleResult, n int) error {
	left := time.Duration(r.until - l.mono())
	if left <= 0 {
		return nil
	}
	if r.spent == spentFallback {
		l.refundLocal(r.key, r.Limit, n, left)
		return nil
	}
	qs, ok := l.store.(QuotaStore)
	if !ok {
		return fmt.Errorf("%w: %T is no QuotaStore", ErrNotSupported, l.store)
	}
	l.denied.forget(r.key)
	check := []Check{{Key: r.key, Limit: r.Limit, ResetAfter: left}}
	err := l.quotaCall(ctx, func(ctx context.Context) error {
		_, err := qs.RefundAllN(ctx, check, n)
		return err
	})
	if err != nil && tickctx.Expired(ctx) == nil {
		l.report(err)
	}
	return err
}

// chargeStore charges n units to c's key in the store, within the
// Limiter's deadline, and by the failure policy when the store fails or
// its breaker is open.
func (l *Limiter) chargeStore(ctx context.Context, c Check, n int) (ChargeResult, error) {
	cs, ok := l.store.(ChargeStore)
	if !ok {
		return ChargeResult{}, fmt.Errorf("ratekit: Charge: %w: %T is no ChargeStore", ErrNotSupported, l.store)
	}
	if !l.inProcess && !l.brk.closed() && l.shardOpen(c.Key) {
		return l.chargeFailed(c, n, nil)
	}
	var res []ChargeResult
	gen := l.denied.generation()
	t0 := l.mono()
	err := l.quotaCall(ctx, func(ctx context.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = storePanicked(p)
			}
		}()
		res, err = cs.ChargeAllN(ctx, []Check{c}, n)
		return err
	})
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("%w: %d results for 1 check", ErrMalformedReply, len(res))
	}
	if l.observer != nil {
		l.observer.StoreCalled(time.Duration(l.mono()-t0), err)
	}
	switch {
	case err == nil:
		if !l.inProcess {
			l.succeeded(c.Key)
			l.rememberDebt(c, t0, res[0].Result, gen)
		}
		return res[0], nil
	case l.inProcess, errors.Is(err, ErrInvalidCost), errors.Is(err, ErrInvalidLimit), errors.Is(err, ErrInvalidIdentity), errors.Is(err, ErrNotSupported):
		return ChargeResult{}, fmt.Errorf("ratekit: Charge: %w", err)
	case tickctx.Expired(ctx) != nil && ctx.Err() != nil:
		return ChargeResult{}, fmt.Errorf("ratekit: Charge: %w", ctx.Err())
	case keyError(err):
		l.report(err)
		l.succeeded(c.Key)
		return ChargeResult{}, fmt.Errorf("ratekit: Charge: %w: %w", ErrKeyRejected, err)
	}
	l.failed(err, c.Key)
	return l.chargeFailed(c, n, err)
}

// rememberDebt feeds the denied-key cache with what the store answered a
// charge of c's key sent at t0, when the cache was at generation gen: a
// key the charge left without a unit is denied at any cost until the
// result's RetryAfter, without asking the store. That is exact as a
// decision's denial is (see deniedCache): the result is the key's state
// after the charge, no unit fits before its RetryAfter, and spending only
// pushes that later. The entry replaces any denial the key had: a request
// it does not cover asks the store, as it would without the cache.
func (l *Limiter) rememberDebt(c Check, t0 int64, r Result, gen uint64) {
	if l.denied == nil || r.Allowed {
		return
	}
	l.denied.record([]Check{{Key: c.Key, Limit: c.Limit}}, 1, t0, []Result{r}, nil, gen)
}

// chargeFailed charges c by the failure policy, the store having failed
// with cause (nil: its breaker is open).
func (l *Limiter) chargeFailed(c Check, n int, cause error) (ChargeResult, error) {
	switch l.policy {
	case FailOpen:
		return ChargeResult{Result: Result{Limit: c.Limit, Degraded: true}}, nil
	case FailClosed:
		res := ChargeResult{Result: Result{Limit: c.Limit, Degraded: true}}
		if cause == nil {
			return res, l.brk.openError()
		}
		return res, fmt.Errorf("%w: %w", ErrUnavailable, cause)
	}
	return l.chargeLocal(c, n, true), nil
}

// chargeLocal charges n units to c's key in the fallback store, under
// this replica's share of its limit when share is set (a charge the store
// could not take), else under c's limit (the fallback's own, which spent
// the decision's units).
func (l *Limiter) chargeLocal(c Check, n int, share bool) ChargeResult {
	if l.fallbackStore == nil {
		return ChargeResult{Result: Result{Limit: c.Limit, Degraded: true}}
	}
	lim := c.Limit
	if share {
		lim = l.localLimit(lim)
	}
	var (
		charged [1]int64
		out     [1]localstore.Result
	)
	local := [1]localstore.Check{{Key: c.Key, Limit: localstore.Limit{
		Rate: lim.Rate, Period: lim.Period, Burst: lim.Burst, Algorithm: localstore.Algorithm(lim.Algorithm),
	}}}
	l.fallbackStore.Charge(local[:], int64(min(n, MaxCharge)), MaxDebtPeriods, charged[:], out[:])
	r := out[0]
	return ChargeResult{
		Result:  Result{Limit: lim, Allowed: r.Allowed, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter, Degraded: true},
		Charged: int(charged[0]),
	}
}
