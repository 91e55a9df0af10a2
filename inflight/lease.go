package inflight

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

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
// Redis fails, Release returns the error (OnError is told too), and the
// Limiter tries again, after a wait that doubles up to a third of the
// lease time, until Redis removes the holder or the lease would have run
// out: the slot is held at most the lease time, since it is no longer
// renewed.
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
	_, err, _ := l.do(context.WithoutCancel(ctx), l.timeout, func(ctx context.Context) (any, error) {
		return releaseScript.Run(ctx, l.client, []string{le.key}, le.holder).Result()
	}, nil)
	if err != nil {
		l.orphaned(ctx, le.key, le.holder)
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

// renewPipeline is how many renewal calls one pipeline carries: a round
// trip per pipeline (per node of a Cluster), and a few milliseconds of
// Redis's time each.
const renewPipeline = 1000

// pipeliner is a client that pipelines commands: *redis.Client, and
// *redis.ClusterClient and *redis.Ring, whose pipelines go to every node
// at once.
type pipeliner interface{ Pipeline() redis.Pipeliner }

// renewCall is one renewal call: holders of one key, all held by this
// Limiter.
type renewCall struct {
	key    string
	leases []*Lease
}

// renewAll renews every lease held: one call per key (per maxRenewBatch
// holders of a key), renewPipeline calls per pipeline, so that a round
// costs one round trip per renewPipeline busy keys, not one per key. A
// client that does not pipeline gets the calls one after the other. A
// lease that Redis no longer holds is lost and renewed no more; a failed
// call is reported, and its leases are tried again next round.
func (l *Limiter) renewAll(ctx context.Context) {
	calls := l.renewCalls()
	timeout := max(l.timeout, l.lease/10)
	p, pipelines := l.client.(pipeliner)
	for len(calls) > 0 && ctx.Err() == nil {
		if !pipelines {
			l.renew(ctx, timeout, calls[0])
			calls = calls[1:]
			continue
		}
		batch := calls[:min(len(calls), renewPipeline)]
		calls = calls[len(batch):]
		l.renewPipelined(ctx, timeout, p, batch)
	}
	l.releaseOrphans(ctx, timeout)
}

// renewCalls returns the calls that renew every lease held, a key's
// holders in calls of at most maxRenewBatch.
func (l *Limiter) renewCalls() []renewCall {
	l.mu.Lock()
	byKey := make(map[string][]*Lease, len(l.live))
	for le := range l.live {
		byKey[le.key] = append(byKey[le.key], le)
	}
	l.mu.Unlock()
	calls := make([]renewCall, 0, len(byKey))
	for key, leases := range byKey {
		for len(leases) > 0 {
			n := min(len(leases), maxRenewBatch)
			calls = append(calls, renewCall{key, leases[:n]})
			leases = leases[n:]
		}
	}
	return calls
}

// renewArgs returns the arguments of renew.lua for c.
func (l *Limiter) renewArgs(c renewCall) []any {
	args := make([]any, 1, 1+len(c.leases))
	args[0] = l.lease.Milliseconds()
	for _, le := range c.leases {
		args = append(args, le.holder)
	}
	return args
}

// renew makes one renewal call on its own.
func (l *Limiter) renew(ctx context.Context, timeout time.Duration, c renewCall) {
	reply, err, _ := l.do(ctx, timeout, func(ctx context.Context) (any, error) {
		return renewScript.Run(ctx, l.client, []string{c.key}, l.renewArgs(c)...).Result()
	}, nil)
	if err == nil {
		err = l.settleRenewal(reply, c.leases)
	}
	if err != nil && ctx.Err() == nil {
		l.report(fmt.Errorf("ratekit: inflight: renew: %w", err))
	}
}

// renewPipelined makes the renewal calls of batch in one pipeline, within
// one deadline. Calls that find the script not cached in Redis go again,
// with the script, in a second pipeline. The first error of a call (of
// the pipeline, when it fails as a whole) is reported, with how many
// calls failed.
func (l *Limiter) renewPipelined(ctx context.Context, timeout time.Duration, p pipeliner, batch []renewCall) {
	reply, err, _ := l.do(ctx, timeout, func(ctx context.Context) (any, error) {
		return pipelineScript(ctx, p, renewScript, len(batch), func(i int) (string, []any) {
			return batch[i].key, l.renewArgs(batch[i])
		}), nil
	}, nil)
	if err != nil {
		if ctx.Err() == nil {
			l.report(fmt.Errorf("ratekit: inflight: renew %d keys: %w", len(batch), err))
		}
		return
	}
	var first error
	failed := 0
	for i, cmd := range reply.([]*redis.Cmd) {
		res, err := cmd.Result()
		if err == nil {
			err = l.settleRenewal(res, batch[i].leases)
		}
		if err != nil {
			if failed++; first == nil {
				first = err
			}
		}
	}
	if first != nil && ctx.Err() == nil {
		l.report(fmt.Errorf("ratekit: inflight: renew: %d of %d keys failed: %w", failed, len(batch), first))
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
