package core

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
)

// This file holds what a Limiter does around its breaker: probing the
// store while the breaker is open, and reporting failures and changes to
// hooks, observers and the log.

// BreakerState returns the state of the Limiter's circuit breaker.
func (l *Limiter) BreakerState() BreakerState { return l.brk.current() }

// failed records a store call that failed with err, and starts the prober
// when the failure opened the breaker.
func (l *Limiter) failed(err error) {
	l.report(err)
	if !l.brk.failed(err, l.mono()) {
		return
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.closed { // after Close, an open breaker stays open
		l.wg.Add(1)
		go l.probe()
	}
}

// probe runs while the breaker is not closed: it waits a backoff with
// jitter, probes the store with one call, and closes the breaker when the
// call succeeds. There is one prober at a time, so one probe at a time.
func (l *Limiter) probe() {
	defer l.wg.Done()
	bo := l.brk.schedule()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := bo.NextBackOff()
		l.brk.probing(l.mono(), wait)
		timer.Reset(wait)
		select {
		case <-l.stop:
			return
		case <-timer.C:
		}
		l.brk.transition(BreakerOpen, BreakerHalfOpen, nil)
		err := l.probeOnce()
		select {
		case <-l.stop: // the probe may have failed because of Close
			return
		default:
		}
		if err == nil {
			l.brk.transition(BreakerHalfOpen, BreakerClosed, nil)
			return
		}
		l.report(err)
		l.brk.transition(BreakerHalfOpen, BreakerOpen, err)
	}
}

// probeOnce makes one store call, under the same deadline as a request's.
// It writes one key with a 1 ms expiry, which no rule's key can equal.
func (l *Limiter) probeOnce() error {
	ctx, cancel := context.WithTimeout(l.stopCtx, l.timeout)
	defer cancel()
	// The prober is counted in wg, so wg cannot be waited to zero here.
	l.wg.Add(1)
	t0 := l.mono()
	_, err := l.spawn(ctx, l.probeChecks, 1)
	if err != nil && ctx.Err() != nil && l.stopCtx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
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

// probeKey returns the probe's storage key: the prefix and a hash tag,
// where every rule's key has a rule name, which is never empty, before ":{".
func probeKey(prefix string) string { return prefix + "{ratekit-probe}" }

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
		l.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"ratekit: circuit breaker open: deciding without the store until a probe succeeds",
			slog.Int("consecutive_failures", l.brk.cfg.Failures),
			slog.String("policy", l.policy.String()),
			slog.Any("error", c.cause),
			slog.Int64("suppressed", suppressed))
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
