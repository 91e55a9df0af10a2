package core

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratekit/internal/rediserr"
	"github.com/ratekit/ratekit/internal/storekey"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// This file holds what a Limiter does around its breaker: probing the
// store while the breaker is open, and reporting failures and changes to
// hooks, observers and the log.

// failed records a store call on key that failed with err, and starts a
// prober when the failure opened a breaker: the Limiter's, or that of
// key's shard over a store that states shards.
func (l *Limiter) failed(err error, key string) {
	l.report(err)
	b := &l.brk
	if l.shards != nil {
		b = &l.shards.get(key, true).brk
	}
	opened := b.failed(err, l.mono())
	if l.shards != nil {
		l.shards.failing.Add(1) // after b counts it: see shardSet.succeeded
	}
	if !opened {
		return
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.closed { // after Close, an open breaker stays open
		l.wg.Add(1)
		go l.probe(b, []Check{{Key: probeKey(l.prefix, key), Limit: probeLimit}})
	}
}

// succeeded records a store call on key that answered.
func (l *Limiter) succeeded(key string) {
	switch {
	case l.shards == nil:
		l.brk.succeeded()
	case l.shards.failing.Load() != 0:
		l.shards.succeeded(key)
	}
}

// shardOpen reports whether the breaker of key's shard is not closed, over
// a store that states shards; it is called while the Limiter's breaker is
// not closed.
func (l *Limiter) shardOpen(key string) bool {
	if l.shards == nil {
		return true
	}
	sh := l.shards.get(key, false)
	return sh != nil && !sh.brk.closed()
}

// shardChanged makes the Limiter's breaker follow c, a change of the
// breaker of shard sh (see shardSet).
func (l *Limiter) shardChanged(sh *shardBrk, c breakerChange) {
	s := l.shards
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	l.brk.follow(s.moved(c), c.cause, sh.name, l.mono())
}

// probe runs while b is not closed: it waits a backoff with jitter, probes
// the store with one call of checks, and closes b when the call succeeds.
// Each breaker has one prober at a time, so one probe at a time.
func (l *Limiter) probe(b *breaker, checks []Check) {
	defer l.wg.Done()
	bo := b.schedule()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := bo.NextBackOff()
		now := l.mono()
		b.probing(now, wait)
		if b != &l.brk {
			l.brk.probing(now, wait) // for a fail-closed Retry-After
		}
		timer.Reset(wait)
		select {
		case <-l.stop:
			return
		case <-timer.C:
		}
		b.transition(BreakerOpen, BreakerHalfOpen, nil)
		err := l.probeOnce(checks)
		select {
		case <-l.stop: // the probe may have failed because of Close
			return
		default:
		}
		if err == nil {
			b.transition(BreakerHalfOpen, BreakerClosed, nil)
			return
		}
		l.report(err)
		b.transition(BreakerHalfOpen, BreakerOpen, err)
	}
}

// probeOnce makes one store call of checks, under the same deadline as a
// request's.
func (l *Limiter) probeOnce(checks []Check) error {
	ctx, cancel := context.WithTimeout(l.stopCtx, l.timeout)
	defer cancel()
	// The prober is counted in wg, so wg cannot be waited to zero here.
	l.wg.Add(1)
	t0 := l.mono()
	c, err := l.spawn(ctx, checks, 1, t0)
	if err == nil {
		err = c.err
	}
	if err != nil && tickctx.Expired(ctx) != nil && l.stopCtx.Err() == nil && rediserr.Timeout(err) {
		err = l.timeoutErr
	}
	if l.observer != nil && l.stopCtx.Err() == nil {
		l.observer.StoreCalled(time.Duration(l.mono()-t0), err)
	}
	return err
}

// probeLimit is the limit of the probe's key: it never denies, and its key
// expires a millisecond after the probe.
var probeLimit = Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}

// probeKey returns the key that probes a breaker opened by a failure on
// key: the prefix and key's hash tag, so that the probe goes where key
// goes (in a Redis Cluster, to key's slot, wherever the slot has moved).
// No rule's key can equal it: every rule's key has a rule name, which is
// never empty, between the prefix and ":{".
func probeKey(prefix, key string) string { return prefix + "{" + storekey.HashTag(key) + "}" }

// breakerChanged is the breaker's onChange: it empties the denied-key cache
// when the breaker closes, calls the hook and the observer, and logs an
// opening at most once per logEvery (a flapping breaker must not flood the
// log), and the closing of each opening logged. The breaker calls it one
// change at a time, in order.
func (l *Limiter) breakerChanged(c breakerChange) {
	if c.to == BreakerClosed {
		// Redis may have restarted empty: what it denied before may no
		// longer be denied.
		l.denied.clear()
	}
	if l.onBreaker != nil {
		l.onBreaker(c.from, c.to)
	}
	if l.observer != nil {
		l.observer.BreakerChanged(c.from, c.to)
	}
	if l.logger == nil {
		return
	}
	now := l.mono()
	switch {
	case c.from == BreakerClosed && c.to == BreakerOpen:
		ok, suppressed := l.breakerLog.take(now)
		l.openLogged = ok
		if !ok {
			return
		}
		attrs := []slog.Attr{
			slog.Int("consecutive_failures", l.brk.cfg.Failures),
			slog.String("policy", l.policy.String()),
			slog.Any("error", c.cause),
			slog.Int64("suppressed", suppressed),
		}
		msg := "ratekit: circuit breaker open: deciding without the store until a probe succeeds"
		if l.shards != nil {
			msg = "ratekit: circuit breaker open: deciding a failing shard's keys without the store until a probe succeeds"
			attrs = append(attrs, slog.String("shard", c.shard))
		}
		l.logger.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
	case c.to == BreakerClosed && l.openLogged:
		l.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"ratekit: circuit breaker closed: the store answers again",
			slog.Duration("outage", time.Duration(now-c.openedAt)),
			slog.Int("failed_probes", c.probes))
	}
}

// logEvery is the least time between two log lines of one kind, so that an
// outage cannot flood the log.
const logEvery = time.Second

// logBudget lets one log line through per logEvery and counts the others.
type logBudget struct {
	next       atomic.Int64 // mono time from which the next line may go out
	suppressed atomic.Int64
}

// take reports whether a line may go out at now and, if so, how many were
// suppressed since the last one.
func (b *logBudget) take(now int64) (ok bool, suppressed int64) {
	next := b.next.Load()
	if now < next || !b.next.CompareAndSwap(next, now+int64(logEvery)) {
		b.suppressed.Add(1)
		return false, 0
	}
	return true, b.suppressed.Swap(0)
}

// report passes a failed store call's error to the hook and, at most once
// per logEvery, to the log.
func (l *Limiter) report(err error) {
	if l.onError != nil {
		l.onError(err)
	}
	if l.logger == nil {
		return
	}
	if ok, suppressed := l.errLog.take(l.mono()); ok {
		msg := "ratekit: store call failed"
		if outOfMemory(err) {
			msg = "ratekit: store call failed: " + oomHint
		}
		l.logger.LogAttrs(context.Background(), slog.LevelWarn, msg,
			slog.Any("error", err),
			slog.String("policy", l.policy.String()),
			slog.String("breaker", l.brk.current().String()),
			slog.Int64("suppressed", suppressed))
	}
}
