package inflight

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratekit/core"
)

// Lease is one slot held by a running request, from [Limiter.Acquire] until
// [Lease.Release]. Its Limiter renews it in Redis while it is held. A nil
// *Lease is valid and releases nothing, so a caller may defer Release
// whatever Acquire answered.
type Lease struct {
	l        *Limiter
	key      string
	holder   string // the holder ID in Redis; "" for a lease taken without Redis
	kind     leaseKind
	released atomic.Bool
	lost     atomic.Bool
}

// leaseKind says where a lease was taken.
type leaseKind uint8

const (
	redisLease leaseKind = iota
	localLease           // a local slot, under core.FailLocal
	openLease            // nothing held, under core.FailOpen
)

// Degraded reports whether the lease was taken without Redis, by the
// failure policy.
func (le *Lease) Degraded() bool { return le != nil && le.kind != redisLease }

// Lost reports whether the lease ran out in Redis while held: renewals
// failed for longer than the lease time (an outage of Redis), and the slot
// may since have gone to another request.
func (le *Lease) Lost() bool { return le != nil && le.lost.Load() }

// Release gives the slot back, at once to every replica. Only the first
// call does anything; later calls, and calls on a nil Lease, return nil.
//
// ctx carries its values to the client (for tracing), but neither its
// cancellation nor its deadline: a request whose client has gone away must
// still free its slot. The Limiter's deadline ([WithTimeout]) applies. When
// Redis fails, Release returns the error (OnError is told too) and the slot
// stays held until its lease runs out, within the lease time, since it is
// no longer renewed.
func (le *Lease) Release(ctx context.Context) error {
	if le == nil || le.released.Swap(true) {
		return nil
	}
	l := le.l
	switch le.kind {
	case localLease:
		l.local.release(le.key)
		return nil
	case openLease:
		return nil
	}
	l.untrack(le)
	_, err := l.do(context.WithoutCancel(ctx), l.timeout, func(ctx context.Context) (any, error) {
		return releaseScript.Run(ctx, l.client, []string{le.key}, le.holder).Result()
	}, nil)
	if err != nil {
		err = fmt.Errorf("ratekit: inflight: release: %w", err)
		l.report(err)
	}
	return err
}

// track adds le to the leases the Limiter renews.
func (l *Limiter) track(le *Lease) {
	l.mu.Lock()
	if l.live != nil {
		l.live[le] = struct{}{}
	}
	l.mu.Unlock()
}

// untrack stops renewing le.
func (l *Limiter) untrack(le *Lease) {
	l.mu.Lock()
	delete(l.live, le)
	l.mu.Unlock()
}

// maxRenewBatch bounds how many holders one renewal call carries.
const maxRenewBatch = 512

// renewAll renews every lease held, in one call per key (per
// maxRenewBatch holders), one key after the other. A lease that Redis no
// longer holds is lost and renewed no more; a failed call is reported, and
// its leases are tried again next round.
func (l *Limiter) renewAll(ctx context.Context) {
	byKey := l.snapshot()
	timeout := max(l.timeout, l.lease/10)
	for key, leases := range byKey {
		for len(leases) > 0 && ctx.Err() == nil {
			batch := leases[:min(len(leases), maxRenewBatch)]
			leases = leases[len(batch):]
			l.renew(ctx, timeout, key, batch)
		}
	}
}

// snapshot returns the leases held, by key.
func (l *Limiter) snapshot() map[string][]*Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	byKey := make(map[string][]*Lease)
	for le := range l.live {
		byKey[le.key] = append(byKey[le.key], le)
	}
	return byKey
}

// renew renews the leases of one key, all held by this Limiter.
func (l *Limiter) renew(ctx context.Context, timeout time.Duration, key string, leases []*Lease) {
	args := make([]any, 1, 1+len(leases))
	args[0] = l.lease.Milliseconds()
	for _, le := range leases {
		args = append(args, le.holder)
	}
	reply, err := l.do(ctx, timeout, func(ctx context.Context) (any, error) {
		return renewScript.Run(ctx, l.client, []string{key}, args...).Result()
	}, nil)
	if err == nil {
		err = l.settleRenewal(reply, leases)
	}
	if err != nil && ctx.Err() == nil {
		l.report(fmt.Errorf("ratekit: inflight: renew: %w", err))
	}
}

// settleRenewal reads the reply of renew.lua for leases, and marks lost
// the leases Redis no longer held.
func (l *Limiter) settleRenewal(reply any, leases []*Lease) error {
	r, ok := reply.([]any)
	if !ok || len(r) != len(leases) {
		return fmt.Errorf("%w: renew replied %T for %d holders", core.ErrMalformedReply, reply, len(leases))
	}
	for i, v := range r {
		if n, ok := v.(int64); ok && n == 0 && !leases[i].released.Load() {
			leases[i].lost.Store(true)
			l.untrack(leases[i])
		}
	}
	return nil
}
