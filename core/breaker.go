package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// BreakerState is the state of a [Limiter]'s circuit breaker, which stops
// calling the store while it fails and finds out by itself when it is back.
type BreakerState int32

const (
	// BreakerClosed is the normal state: decisions go to the store.
	BreakerClosed BreakerState = iota
	// BreakerOpen follows consecutive store failures: decisions are made
	// without the store, at no wait, by the failure policy, while the
	// breaker waits for its next probe.
	BreakerOpen
	// BreakerHalfOpen is the time of one probe of the store: decisions are
	// still made without it. A probe that succeeds closes the breaker; one
	// that fails opens it again, for a longer wait.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "breaker-state(" + strconv.Itoa(int(s)) + ")"
}

// Breaker defaults; see [WithBreaker].
const (
	defaultBreakerFailures   = 5
	defaultBreakerBackoff    = 100 * time.Millisecond
	defaultBreakerMaxBackoff = time.Second
)

// probeJitter spreads each wait for a probe over ±50% of its base, so
// replicas that lost the store together do not probe it together.
const probeJitter = 0.5

// ErrBreakerOpen is wrapped, together with [ErrUnavailable] and the store's
// last error, by the error of a fail-closed decision made while the circuit
// breaker was open, without calling the store.
var ErrBreakerOpen = errors.New("ratekit: circuit breaker open")

// breaker counts consecutive store failures and holds the state that the
// Limiter's prober moves. Reads on the request path are atomic loads.
type breaker struct {
	state     atomic.Int32 // BreakerState
	failures  atomic.Int32 // consecutive failed store calls while closed
	threshold int32
	backoff   time.Duration
	max       time.Duration

	nextProbe atomic.Int64          // mono time of the next probe, while not closed
	openErr   atomic.Pointer[error] // fail-closed error while not closed

	mu         sync.Mutex // serialises transitions and the calls of their hook
	openedAt   int64      // mono time the breaker last opened
	probes     int        // failed probes since then
	openLogged bool       // the last opening was logged: so is the closing
}

func (b *breaker) current() BreakerState { return BreakerState(b.state.Load()) }

// BreakerState returns the state of the Limiter's circuit breaker.
func (l *Limiter) BreakerState() BreakerState { return l.brk.current() }

// succeeded records a store call that answered.
func (l *Limiter) succeeded() {
	if l.brk.failures.Load() != 0 {
		l.brk.failures.Store(0)
	}
}

// failed records a store call that failed with err, and opens the breaker
// after enough of them in a row.
func (l *Limiter) failed(err error) {
	l.report(err)
	if l.brk.failures.Add(1) >= l.brk.threshold && l.brk.current() == BreakerClosed {
		l.trip(err)
	}
}

// trip opens a closed breaker and starts the prober that will close it.
func (l *Limiter) trip(err error) {
	b := &l.brk
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current() != BreakerClosed {
		return
	}
	now := l.mono()
	b.openedAt, b.probes = now, 0
	b.setOpenErr(err)
	b.nextProbe.Store(now + int64(b.backoff))
	b.state.Store(int32(BreakerOpen))
	l.breakerChanged(BreakerClosed, BreakerOpen, err)

	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.closed { // after Close, an open breaker stays open
		l.wg.Add(1)
		go l.probe()
	}
}

func (b *breaker) setOpenErr(cause error) {
	err := fmt.Errorf("%w: %w; last store error: %w", ErrUnavailable, ErrBreakerOpen, cause)
	b.openErr.Store(&err)
}

// openError returns the error of a fail-closed decision made while the
// breaker is not closed.
func (b *breaker) openError() error {
	if p := b.openErr.Load(); p != nil {
		return *p
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, ErrBreakerOpen)
}

// transition moves the breaker from one state to another, if it is still in
// from. cause is the error of a failed probe.
func (l *Limiter) transition(from, to BreakerState, cause error) {
	b := &l.brk
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current() != from {
		return
	}
	switch {
	case to == BreakerClosed:
		// Redis may have restarted empty: what it denied before may no
		// longer be denied.
		l.denied.clear()
		b.failures.Store(0)
	case to == BreakerOpen && cause != nil:
		b.setOpenErr(cause)
		b.probes++
	}
	b.state.Store(int32(to))
	l.breakerChanged(from, to, cause)
}

// probe runs while the breaker is not closed: it waits a backoff with
// jitter, probes the store with one call, and closes the breaker when the
// call succeeds. There is one prober at a time, so one probe at a time.
func (l *Limiter) probe() {
	defer l.wg.Done()
	b := &l.brk
	bo := backoff.ExponentialBackOff{
		RandomizationFactor: probeJitter,
		Multiplier:          2,
		// the base stops growing where base × (1 + jitter) reaches the
		// maximum, so that no wait exceeds it
		MaxInterval: time.Duration(float64(b.max) / (1 + probeJitter)),
	}
	bo.InitialInterval = min(b.backoff, bo.MaxInterval)
	bo.Reset()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := bo.NextBackOff()
		b.nextProbe.Store(l.mono() + int64(wait))
		timer.Reset(wait)
		select {
		case <-l.stop:
			return
		case <-timer.C:
		}
		l.transition(BreakerOpen, BreakerHalfOpen, nil)
		err := l.probeOnce()
		select {
		case <-l.stop: // the probe may have failed because of Close
			return
		default:
		}
		if err == nil {
			l.transition(BreakerHalfOpen, BreakerClosed, nil)
			return
		}
		l.report(err)
		l.transition(BreakerHalfOpen, BreakerOpen, err)
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
var probeLimit = Limit{Rate: MaxRate, Period: time.Second, Burst: MaxRate}

// probeKey returns the probe's storage key: the prefix and a hash tag,
// where every rule's key has a rule name, which is never empty, before ":{".
func probeKey(prefix string) string { return prefix + "{ratekit-probe}" }

// breakerChanged calls the hook and logs a change of state: an opening at
// most once per logEvery (a flapping breaker must not flood the log), and
// the closing of each opening logged. The caller holds brk.mu, so calls
// happen one at a time and in order.
func (l *Limiter) breakerChanged(from, to BreakerState, cause error) {
	if l.onBreaker != nil {
		l.onBreaker(from, to)
	}
	if l.observer != nil {
		l.observer.BreakerChanged(from, to)
	}
	if l.logger == nil {
		return
	}
	b := &l.brk
	now := l.mono()
	switch {
	case from == BreakerClosed && to == BreakerOpen:
		ok, suppressed := l.breakerLog.take(now)
		b.openLogged = ok
		if !ok {
			return
		}
		l.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"ratekit: circuit breaker open: deciding without the store until a probe succeeds",
			slog.Int("consecutive_failures", int(b.threshold)),
			slog.String("policy", l.policy.String()),
			slog.Any("error", cause),
			slog.Int64("suppressed", suppressed))
	case to == BreakerClosed && b.openLogged:
		l.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"ratekit: circuit breaker closed: the store answers again",
			slog.Duration("outage", time.Duration(now-b.openedAt)),
			slog.Int("failed_probes", b.probes))
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
		l.logger.LogAttrs(context.Background(), slog.LevelWarn, "ratekit: store call failed",
			slog.Any("error", err),
			slog.String("policy", l.policy.String()),
			slog.String("breaker", l.brk.current().String()),
			slog.Int64("suppressed", suppressed))
	}
}
