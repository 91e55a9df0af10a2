package outbound

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/rediserr"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// take reserves n units of ks, acting by actBy (zero: any time): from
// Redis while it answers, else from this process's share.
func (l *Limiter) take(ctx context.Context, ks *keyState, n int, actBy time.Time) (turn, error) {
	done, err := l.breaker.Allow()
	if err != nil { // open, or another call is probing
		return l.takeLocal(ks, n, l.maxWait(actBy))
	}
	share, floor := l.recovering(ks)
	r, err := l.reserve(ctx, ks.key, n, l.maxWait(actBy), share, floor)
	recv := l.now()
	switch {
	case err == nil:
		done(nil)
	case tickctx.Expired(ctx) != nil: // the caller gave up: no verdict on Redis
		done(nil)
		return turn{}, fmt.Errorf("ratekit: outbound: %w", tickctx.Expired(ctx))
	case rediserr.KeyError(err):
		done(nil) // this key's trouble, not Redis's
		return turn{}, fmt.Errorf("%w: %w", core.ErrKeyRejected, err)
	default:
		done(err)
		return l.takeLocal(ks, n, l.maxWait(actBy)) // the time the call took counts
	}
	l.backOnRedis(ks, floor)
	l.noteReply(ks, r, recv)
	t := turn{ok: r.granted, wait: r.wait, act: r.act, iv: r.iv, wake: recv.Add(r.wait)}
	return t, nil
}

// noteReply records what a reply tells of the key: the end of the fleet's
// schedule, a pause, the shared rate.
func (l *Limiter) noteReply(ks *keyState, r reply, recv time.Time) {
	burst := time.Duration(l.limit.burst()) * time.Duration(r.iv) * time.Microsecond
	ks.noteHorizon(recv.Add(max(r.ahead-burst, 0)))
	if r.pause > 0 {
		ks.notePause(recv.Add(r.pause))
	}
	if l.cfg.aimd != nil {
		l.noteInterval(r.iv)
	}
}

// noteInterval tells the observers of a change of the shared rate, seen as
// the interval of a reply (its share taken out).
func (l *Limiter) noteInterval(iv int64) {
	if old := l.lastIV.Swap(iv); old == iv || len(l.cfg.observers) == 0 {
		return
	}
	span := float64(l.limit.Period.Microseconds()) * (1 + l.cfg.margin)
	perSec := span / float64(iv) / l.limit.Period.Seconds() / (1 + l.cfg.margin)
	for _, o := range l.cfg.observers {
		o.RateChanged(l.name, perSec)
	}
}

// newBreaker returns the circuit breaker in front of Redis.
func (l *Limiter) newBreaker() *gobreaker.TwoStepCircuitBreaker[struct{}] {
	failures := uint32(l.cfg.failures)
	return gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        l.name,
		MaxRequests: 1,
		Timeout:     l.cfg.openFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, context.Canceled) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			for _, o := range l.cfg.observers {
				o.BreakerChanged(l.name, breakerState(from), breakerState(to))
			}
		},
	})
}

// breakerState translates gobreaker's states into core's.
func breakerState(s gobreaker.State) core.BreakerState {
	switch s {
	case gobreaker.StateOpen:
		return core.BreakerOpen
	case gobreaker.StateHalfOpen:
		return core.BreakerHalfOpen
	}
	return core.BreakerClosed
}

// BreakerState returns the state of the circuit breaker in front of Redis.
func (l *Limiter) BreakerState() core.BreakerState { return breakerState(l.breaker.State()) }
