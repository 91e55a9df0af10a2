package core

import (
	"errors"
	"fmt"
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

// Breaker defaults; see [BreakerConfig].
const (
	defaultBreakerFailures   = 5
	defaultBreakerBackoff    = 100 * time.Millisecond
	defaultBreakerMaxBackoff = time.Second
	maxBreakerFailures       = 1 << 30
)

// probeJitter spreads each wait for a probe over ±50% of its base, so
// replicas that lost the store together do not probe it together.
const probeJitter = 0.5

// ErrBreakerOpen is wrapped, together with [ErrUnavailable] and the store's
// last error, by the error of a fail-closed decision made while the circuit
// breaker was open, without calling the store.
var ErrBreakerOpen = errors.New("ratekit: circuit breaker open")

// resolve returns b with its defaults filled in, or an error for a bad
// value.
func (b BreakerConfig) resolve() (BreakerConfig, error) {
	if b.Failures < 0 || b.Failures > maxBreakerFailures || b.Backoff < 0 || b.MaxBackoff < 0 {
		return b, fmt.Errorf("ratekit: WithBreaker(%+v): want Failures from 0 to %d and no negative duration", b, maxBreakerFailures)
	}
	if b.Failures == 0 {
		b.Failures = defaultBreakerFailures
	}
	if b.Backoff == 0 {
		b.Backoff = defaultBreakerBackoff
	}
	if b.MaxBackoff == 0 {
		b.MaxBackoff = max(defaultBreakerMaxBackoff, b.Backoff)
	}
	if b.MaxBackoff < b.Backoff {
		return b, fmt.Errorf("ratekit: WithBreaker: MaxBackoff %v is shorter than Backoff %v", b.MaxBackoff, b.Backoff)
	}
	return b, nil
}

// breaker is a circuit breaker: it counts consecutive store failures,
// opens after enough of them, and moves between open, half-open and closed
// as its owner's probes fail or succeed. It reads no clock: callers pass
// the time, in ns of a monotonic clock. Reads on the request path are
// atomic loads; transitions are serialised, and each calls onChange under
// the breaker's lock, so changes are reported one at a time and in order.
type breaker struct {
	cfg      BreakerConfig
	onChange func(breakerChange) // may be nil

	state     atomic.Int32          // BreakerState
	failures  atomic.Int32          // consecutive failed store calls while closed
	nextProbe atomic.Int64          // time of the next probe, while not closed
	openErr   atomic.Pointer[error] // fail-closed error while not closed

	mu       sync.Mutex // serialises transitions and the calls of onChange
	openedAt int64      // time the breaker last opened
	probes   int        // failed probes since then
}

func (b *breaker) current() BreakerState { return BreakerState(b.state.Load()) }

// closed reports whether store calls may go out.
func (b *breaker) closed() bool { return b.current() == BreakerClosed }

// succeeded records a store call that answered.
func (b *breaker) succeeded() {
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
}

// failed records a store call that failed with err at now, and reports
// whether this failure opened the breaker: the caller then starts probing.
func (b *breaker) failed(err error, now int64) bool {
	if b.failures.Add(1) < int32(b.cfg.Failures) || !b.closed() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed() {
		return false
	}
	b.openedAt, b.probes = now, 0
	b.setOpenErr(err)
	b.nextProbe.Store(now + int64(b.cfg.Backoff))
	b.state.Store(int32(BreakerOpen))
	b.changed(BreakerClosed, BreakerOpen, err)
	return true
}

// transition moves the breaker from one state to another, if it is still
// in from, and reports whether it did. cause is the error of a failed
// probe.
func (b *breaker) transition(from, to BreakerState, cause error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current() != from {
		return false
	}
	switch {
	case to == BreakerClosed:
		b.failures.Store(0)
	case to == BreakerOpen && cause != nil:
		b.setOpenErr(cause)
		b.probes++
	}
	b.state.Store(int32(to))
	b.changed(from, to, cause)
	return true
}

// breakerChange is one change of a breaker's state, as onChange hears it.
type breakerChange struct {
	from, to BreakerState
	cause    error  // the store's error, when a failure opened the breaker
	openedAt int64  // when the breaker last opened
	probes   int    // probes failed since
	shard    string // the shard whose breaker moved the Limiter's, if any
}

func (b *breaker) changed(from, to BreakerState, cause error) {
	b.changedFor(from, to, cause, "")
}

func (b *breaker) changedFor(from, to BreakerState, cause error, shard string) {
	if b.onChange != nil {
		b.onChange(breakerChange{from: from, to: to, cause: cause, openedAt: b.openedAt, probes: b.probes, shard: shard})
	}
}

// follow moves b, the breaker of a sharded store's shards together (see
// shardSet), to the state to, which a change of shard's breaker at now
// brings about; cause is the store's error of that change.
func (b *breaker) follow(to BreakerState, cause error, shard string, now int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	from := b.current()
	if to == BreakerOpen && cause != nil {
		b.setOpenErr(cause)
	}
	if from == to {
		return
	}
	switch {
	case from == BreakerClosed:
		b.openedAt, b.probes = now, 0
	case from == BreakerHalfOpen && to == BreakerOpen && cause != nil:
		b.probes++
	}
	b.state.Store(int32(to))
	b.changedFor(from, to, cause, shard)
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

// retryAfter is the wait a fail-closed denial at now asks for: until the
// breaker's next probe, and at least a second.
func (b *breaker) retryAfter(now int64) time.Duration {
	retry := time.Second
	if !b.closed() {
		retry = max(retry, time.Duration(b.nextProbe.Load()-now))
	}
	return retry
}

// schedule returns the waits between probes: b.cfg.Backoff doubling up to
// b.cfg.MaxBackoff, each drawn within ±probeJitter of its base and never
// above MaxBackoff.
func (b *breaker) schedule() *backoff.ExponentialBackOff {
	bo := &backoff.ExponentialBackOff{
		RandomizationFactor: probeJitter,
		Multiplier:          2,
		// the base stops growing where base × (1 + jitter) reaches the
		// maximum, so that no wait exceeds it
		MaxInterval: time.Duration(float64(b.cfg.MaxBackoff) / (1 + probeJitter)),
	}
	bo.InitialInterval = min(b.cfg.Backoff, bo.MaxInterval)
	bo.Reset()
	return bo
}

// probing records, at now, that the next probe comes after wait.
func (b *breaker) probing(now int64, wait time.Duration) { b.nextProbe.Store(now + int64(wait)) }

// shardSet holds the breakers of the shards of a store that states them
// ([Traits].Shard), each made when a key of its shard first fails. The
// Limiter's own breaker then follows them (see Limiter.shardChanged): open
// while any shard's breaker is open, half-open while one is probed and
// none is open, closed when all are closed. So a decision costs one atomic
// load while every breaker is closed, as over a store of one shard, and
// looks for its key's shard only while some shard fails.
type shardSet struct {
	of       func(key string) string
	cfg      BreakerConfig
	onChange func(*shardBrk, breakerChange)

	mu     sync.Mutex                           // serialises additions to byName
	byName atomic.Pointer[map[string]*shardBrk] // copied on write

	// failing grows with each failure a shard's breaker counts, and is set
	// back to zero once no breaker counts any: while it is zero, a call
	// that answered has no count to reset.
	failing atomic.Int64

	stateMu  sync.Mutex // serialises the following of changes
	open     int        // shards whose breaker is open
	halfOpen int        // shards whose breaker is half-open
}

// shardBrk is the breaker of one shard.
type shardBrk struct {
	name string
	brk  breaker
}

// get returns the breaker of key's shard; when it has none yet, a new one
// if create is set, else nil.
func (s *shardSet) get(key string, create bool) *shardBrk {
	name := s.of(key)
	if sh := s.lookup(name); sh != nil || !create {
		return sh
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.lookup(name); sh != nil {
		return sh
	}
	sh := &shardBrk{name: name}
	sh.brk.cfg = s.cfg
	sh.brk.onChange = func(c breakerChange) { s.onChange(sh, c) }
	m := map[string]*shardBrk{name: sh}
	if old := s.byName.Load(); old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	s.byName.Store(&m)
	return sh
}

func (s *shardSet) lookup(name string) *shardBrk {
	if m := s.byName.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

// succeeded records a store call on key that answered, once some shard's
// breaker counted a failure.
func (s *shardSet) succeeded(key string) {
	seen := s.failing.Load()
	if sh := s.get(key, false); sh != nil {
		sh.brk.succeeded()
	}
	if m := s.byName.Load(); m != nil {
		for _, sh := range *m {
			if sh.brk.failures.Load() != 0 {
				return
			}
		}
	}
	// unless a failure came meanwhile, no breaker counts any
	s.failing.CompareAndSwap(seen, 0)
}

// moved records c, a change of one shard's breaker, under stateMu, and
// returns the state that the breaker of all shards follows.
func (s *shardSet) moved(c breakerChange) BreakerState {
	for _, d := range []struct {
		state BreakerState
		by    int
	}{{c.from, -1}, {c.to, 1}} {
		switch d.state {
		case BreakerOpen:
			s.open += d.by
		case BreakerHalfOpen:
			s.halfOpen += d.by
		}
	}
	switch {
	case s.open > 0:
		return BreakerOpen
	case s.halfOpen > 0:
		return BreakerHalfOpen
	}
	return BreakerClosed
}
