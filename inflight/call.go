package inflight

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/rediserr"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// errTimeout is the error of a call that missed its deadline.
var errTimeout = errors.New("ratekit: inflight: redis gave no answer within the deadline")

// call is one Redis call on a goroutine of its own.
type call struct {
	state atomic.Int32 // callRunning, then callDone or callAbandoned
	reply any
	err   error
	done  chan struct{}
}

const (
	callRunning int32 = iota
	callDone
	callAbandoned
)

// do runs f with a deadline of timeout within ctx, and returns by that
// deadline whatever the client does. A client that keeps deadlines by
// itself is called on the caller's goroutine; any other runs on a goroutine
// of its own, which the caller abandons at the deadline: do then reports
// abandoned, and late, when not nil, gets the reply or the error the call
// ends with. A panic of the client becomes an error.
//
// A client that keeps deadlines gets ctx itself when its deadline comes
// first, else a pooled deadline (package tickctx): no allocation and no
// timer of its own, where context.WithTimeout costs four allocations and
// a timer, on each of a request's two calls (acquire and release). It
// carries ctx's values but not its cancellation: the call ends by the
// deadline at the latest, as go-redis, which keeps deadlines through the
// connection's, would end it anyway.
func (l *Limiter) do(ctx context.Context, timeout time.Duration, f func(context.Context) (any, error), late func(any, error)) (reply any, err error, abandoned bool) {
	if l.keeps {
		cctx, pooled := l.deadlines.Within(ctx, timeout)
		defer l.deadlines.Put(pooled)
		reply, err := guarded(l.divert.Mark(cctx), f)
		return reply, deadlineError(ctx, cctx, err), false
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l.mu.Lock()
	direct := l.closed
	if !direct {
		l.wg.Add(1)
	}
	l.mu.Unlock()
	if direct {
		reply, err := guarded(cctx, f)
		return reply, deadlineError(ctx, cctx, err), false
	}
	c := &call{done: make(chan struct{})}
	go func() {
		defer l.wg.Done()
		// the call outlives the caller's deadline: it keeps the context's
		// values, and the client's own timeouts bound it
		reply, err := guarded(context.WithoutCancel(cctx), f)
		c.reply, c.err = reply, err
		if c.state.CompareAndSwap(callRunning, callDone) {
			close(c.done)
			return
		}
		if late != nil {
			late(reply, err)
		}
	}()
	select {
	case <-c.done:
		return c.reply, c.err, false
	case <-cctx.Done():
	}
	if !c.state.CompareAndSwap(callRunning, callAbandoned) {
		<-c.done // answered at the last moment
		return c.reply, c.err, false
	}
	return nil, deadlineError(ctx, cctx, cctx.Err()), true
}

// mayHaveRun reports whether a call that failed with err may have run in
// Redis all the same: unless Redis answered with an error reply, it may
// have (a timeout, a connection lost after the command went out).
func mayHaveRun(err error) bool {
	var rerr redis.Error
	return err != nil && !errors.As(err, &rerr)
}

// guarded calls f, turning a panic into an error.
func guarded(ctx context.Context, f func(context.Context) (any, error)) (reply any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ratekit: inflight: redis client panicked: %v", p)
		}
	}()
	return f(ctx)
}

// deadlineError returns err, or errTimeout when err is the call's own
// deadline passing while the caller's is still ahead: go-redis, keeping
// deadlines on its connection, may time out before the context's timer
// fires, so both go by the clock (tickctx.Expired).
func deadlineError(ctx, cctx context.Context, err error) error {
	if err != nil && tickctx.Expired(ctx) == nil && tickctx.Expired(cctx) != nil && rediserr.Timeout(err) {
		return fmt.Errorf("%w: %w", errTimeout, context.DeadlineExceeded)
	}
	return err
}
