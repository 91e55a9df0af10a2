package inflight

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/rediserr"
	"github.com/ratekit/ratekit/internal/redisopt"
	"github.com/ratekit/ratekit/internal/tickctx"
)

var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/release.lua
	releaseSrc string

	acquireScript = redis.NewScript(acquireSrc)
	renewScript   = redis.NewScript(renewSrc)
	releaseScript = redis.NewScript(releaseSrc)
)

// Result is the outcome of one [Limiter.Acquire].
type Result struct {
	// Limit is the cap applied: the one asked for, or this replica's share
	// of it when decided locally under [WithReplicas].
	Limit int
	// Allowed reports whether a slot was taken.
	Allowed bool
	// InFlight is how many slots the key has taken, this one included when
	// Allowed. 0 when decided without counting ([core.FailOpen],
	// [core.FailClosed]).
	InFlight int
	// RetryAfter is, on a denial, how long to wait before trying again:
	// [DefaultRetryAfter].
	RetryAfter time.Duration
	// Degraded reports that Redis could not decide and the failure policy
	// did.
	Degraded bool
}

// Limiter caps how many requests of a key run at once, across every
// process that shares its Redis. It is safe for concurrent use. One
// goroutine renews the leases of its running requests; [Limiter.Close]
// stops it.
type Limiter struct {
	client redis.Scripter
	keeps  bool // the client returns by its context's deadline by itself
	// divert, when not nil, keeps the deadlines of calls made with
	// contexts it marked, over a *redis.Client without
	// ContextTimeoutEnabled (see do)
	divert *redisopt.Divert
	// deadlines are the pooled deadlines of the calls to a client that
	// keeps them (see do)
	deadlines tickctx.Pool
	prefix    string
	lease     time.Duration
	timeout   time.Duration
	policy    core.FailurePolicy
	replicas  int
	onError   func(error)

	local localSlots

	// test hooks: the renewal ticker, and a call after each round
	newTicker  func(time.Duration) (<-chan time.Time, func())
	afterRenew func()

	mu      sync.Mutex
	live    map[*Lease]struct{}  // leases held in Redis, renewed while here
	orphans map[orphan]time.Time // slots no lease holds, released until then
	wake    chan struct{}        // an orphan was added
	closed  bool
	stop    chan struct{}
	stopCtx context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the renewal goroutine and calls abandoned at their deadline
}

// New returns a Limiter over client: a *redis.Client, *redis.ClusterClient,
// *redis.Ring, a failover client or anything else that runs scripts, whose
// pool, TLS and hooks apply unchanged; the Limiter never closes it. It
// starts the renewal goroutine, which [Limiter.Close] stops. It returns an
// error for a nil client and for a bad option.
func New(client redis.Scripter, opts ...Option) (*Limiter, error) {
	if client == nil {
		return nil, errors.New("ratekit: inflight: New: nil client")
	}
	l := &Limiter{
		client:    client,
		prefix:    core.DefaultPrefix,
		lease:     DefaultLease,
		timeout:   DefaultTimeout,
		replicas:  1,
		newTicker: realTicker,
		live:      make(map[*Lease]struct{}),
		orphans:   make(map[orphan]time.Time),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("ratekit: inflight: New: nil option")
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	l.divert, l.keeps = redisopt.KeepDeadlines(client)
	l.local.held = make(map[string]int)
	l.start()
	return l, nil
}

// start starts the renewal goroutine, which also releases the orphans:
// when one is added, and again, while some remain, after a wait that
// doubles from the deadline up to a third of the lease time.
func (l *Limiter) start() {
	l.stopCtx, l.cancel = context.WithCancel(context.Background())
	tick, stop := l.newTicker(l.lease / 3)
	l.wg.Go(func() {
		defer stop()
		retry := time.NewTimer(time.Hour)
		retry.Stop()
		defer retry.Stop()
		wait := l.timeout
		for {
			select {
			case <-l.stop:
				return
			case <-tick:
				l.renewAll(l.stopCtx)
				if l.afterRenew != nil {
					l.afterRenew()
				}
			case <-l.wake:
				wait = l.timeout
				l.releaseOrphans(l.stopCtx, l.timeout)
			case <-retry.C:
				wait = min(2*wait, l.lease/3)
				l.releaseOrphans(l.stopCtx, l.timeout)
			}
			if l.orphanCount() > 0 {
				retry.Reset(wait)
			}
		}
	})
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Close stops renewing leases and waits for the renewal goroutine and for
// calls abandoned at their deadline. Leases still held are not released,
// nor are slots still to be given back after a failed release or a late
// acquisition tried again: nothing renews them, so they run out within the
// lease time. Call it once
// the server has stopped and its requests have ended. Leases can still be
// released after Close. Close is idempotent and returns nil.
func (l *Limiter) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.live = nil
	l.orphans = nil
	l.mu.Unlock()
	close(l.stop)
	l.cancel()
	l.wg.Wait()
	return nil
}

// LeaseTime returns the lease time of the Limiter's slots.
func (l *Limiter) LeaseTime() time.Duration { return l.lease }

// Acquire takes one of the limit slots of key for a request that starts
// now, if fewer than limit are taken, and returns its [Lease]: call
// [Lease.Release] when the request ends. key is a storage key, such as
// [Limiter.Key] builds. The request's context reaches Redis, within the
// deadline ([WithTimeout]).
//
// Being denied is a Result with Allowed false and a nil Lease, never an
// error. When Redis cannot decide, the failure policy does and the Result
// is Degraded: under [core.FailClosed] Acquire returns a nil Lease and an
// error wrapping [core.ErrUnavailable]. It also returns an error for an
// empty key or a limit below 1, when ctx ends first (the caller gave up,
// not a failure of Redis), and, wrapping [core.ErrKeyRejected], when Redis
// refuses the call itself, such as a key of another type.
func (l *Limiter) Acquire(ctx context.Context, key string, limit int) (*Lease, Result, error) {
	switch {
	case key == "":
		return nil, Result{}, fmt.Errorf("%w: empty storage key", core.ErrInvalidIdentity)
	case limit < 1:
		return nil, Result{}, fmt.Errorf("%w: concurrency limit %d (want at least 1)", core.ErrInvalidLimit, limit)
	}
	if err := ctx.Err(); err != nil {
		return nil, Result{}, fmt.Errorf("ratekit: inflight: %w", err)
	}
	holder := rand.Text()
	reply, err, abandoned := l.do(ctx, l.timeout, func(ctx context.Context) (any, error) {
		return acquireScript.Run(ctx, l.client, []string{key}, limit, l.lease.Milliseconds(), holder).Result()
	}, func(reply any, err error) { l.settleLate(ctx, key, holder, reply, err) })
	if !abandoned && mayHaveRun(err) {
		// on the caller's goroutine, past its deadline or cut off: the
		// script may have taken a slot, which nothing would give back
		l.orphaned(ctx, key, holder)
	}
	var allowed bool
	var n int
	if err == nil {
		allowed, n, err = parseAcquire(reply)
	}
	if err != nil {
		return l.failed(ctx, key, limit, err)
	}
	res := Result{Limit: limit, Allowed: allowed, InFlight: n}
	if !allowed {
		res.RetryAfter = DefaultRetryAfter
		return nil, res, nil
	}
	le := &Lease{l: l, key: key, holder: holder}
	l.track(le)
	return le, res, nil
}

// settleLate gives back the slot that an acquisition abandoned at its
// deadline took after all: released as soon as its reply comes, or, when
// the call failed in a way that may have let it run, taken charge of as
// an orphan.
func (l *Limiter) settleLate(ctx context.Context, key, holder string, reply any, err error) {
	if err != nil {
		if mayHaveRun(err) {
			l.orphaned(ctx, key, holder)
		}
		return
	}
	if allowed, _, err := parseAcquire(reply); err == nil && allowed {
		le := &Lease{l: l, key: key, holder: holder}
		_ = le.Release(ctx) // a failure makes it an orphan
	}
}

// parseAcquire reads the reply of acquire.lua.
func parseAcquire(reply any) (allowed bool, n int, err error) {
	r, ok := reply.([]any)
	if !ok || len(r) != 2 {
		return false, 0, fmt.Errorf("%w: acquire replied %T %v", core.ErrMalformedReply, reply, reply)
	}
	a, ok1 := r[0].(int64)
	c, ok2 := r[1].(int64)
	if !ok1 || !ok2 || a < 0 || a > 1 || c < 0 {
		return false, 0, fmt.Errorf("%w: acquire replied %v", core.ErrMalformedReply, r)
	}
	return a == 1, int(c), nil
}

// failed decides an acquisition that Redis could not, by the failure
// policy, or returns the error when it is not Redis's failure.
func (l *Limiter) failed(ctx context.Context, key string, limit int, err error) (*Lease, Result, error) {
	if gaveUp := tickctx.Expired(ctx); gaveUp != nil { // the caller's deadline, or its end
		return nil, Result{}, fmt.Errorf("ratekit: inflight: %w", gaveUp)
	}
	l.report(err)
	if rediserr.KeyError(err) {
		return nil, Result{}, fmt.Errorf("%w: %w", core.ErrKeyRejected, err)
	}
	switch l.policy {
	case core.FailOpen:
		return &Lease{l: l, key: key, kind: openLease}, Result{Limit: limit, Allowed: true, Degraded: true}, nil
	case core.FailClosed:
		res := Result{Limit: limit, RetryAfter: DefaultRetryAfter, Degraded: true}
		return nil, res, fmt.Errorf("%w: %w", core.ErrUnavailable, err)
	}
	share := (limit + l.replicas - 1) / l.replicas
	n, ok := l.local.acquire(key, share)
	res := Result{Limit: share, Allowed: ok, InFlight: n, Degraded: true}
	if !ok {
		res.RetryAfter = DefaultRetryAfter
		return nil, res, nil
	}
	return &Lease{l: l, key: key, kind: localLease}, res, nil
}

// report tells OnError of err.
func (l *Limiter) report(err error) {
	if l.onError != nil {
		l.onError(err)
	}
}
