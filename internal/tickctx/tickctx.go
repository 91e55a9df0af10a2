// Package tickctx makes store-call deadlines without a timer or an
// allocation of their own, for calls made on the caller's goroutine to a
// client that gives up at its context's deadline by itself (go-redis with
// ContextTimeoutEnabled).
//
// context.WithTimeout costs four allocations (the context, its timer, its
// done channel and the timer's function) and a timer set and stopped on
// every call. A [Pool] instead hands out pooled contexts, and the calls
// that start within a tick of one another share one deadline, the first
// one's, kept by one timer. Under a steady load a Pool sets about 64
// timers per timeout instead of one per call.
//
// Each user keeps a Pool of its own, so that timers made in a
// testing/synctest bubble stay in it.
package tickctx

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Pool makes the deadlines of calls; its zero value is ready to use.
type Pool struct {
	pool sync.Pool            // of *Ctx
	tick atomic.Pointer[tick] // the newest tick, nil before the first call
}

// tick is one deadline shared by the calls that start within a tick of
// the first: their own deadlines are at most a tick later than at, so that
// sharing it moves a call's deadline earlier by less than a tick, never
// later. done is closed at at by a timer that nothing stops: a tick nobody
// uses any longer ends by itself.
type tick struct {
	at   time.Time
	done chan struct{}
}

// Of is how far apart, at most, the deadlines of calls sharing one tick
// are under timeout: a 64th of it (under 1 ms for a 50 ms timeout), so
// that a call keeps at least 98% of its time.
func Of(timeout time.Duration) time.Duration { return timeout / 64 }

// Ctx is the context of one call. It carries its parent's values and the
// deadline of its tick, but not its parent's cancellation: a caller that
// gives up during the call sees the call end by the deadline at the
// latest (a client that keeps deadlines through socket deadlines, as
// go-redis does, ends it no sooner anyway). A Ctx is only given to a call
// on the caller's goroutine, and reused once that call returned: the
// callee must not keep it past the call.
type Ctx struct {
	parent context.Context
	tick   *tick
}

// Get returns a Ctx within parent for a call whose deadline under timeout
// is at: its own deadline is at most at, and less than a tick before it.
// It costs no allocation unless the last Ctx put back expired, or a new
// tick begins.
func (p *Pool) Get(parent context.Context, at time.Time, timeout time.Duration) *Ctx {
	c, _ := p.pool.Get().(*Ctx)
	if c == nil {
		c = new(Ctx)
	}
	c.parent, c.tick = parent, p.tickFor(at, timeout)
	return c
}

// Within returns the context of a call of timeout from now within parent:
// parent itself when its own deadline comes first, else a Ctx from the
// pool, which it also returns for [Pool.Put] once the call returned (nil
// when it returns parent).
func (p *Pool) Within(parent context.Context, timeout time.Duration) (context.Context, *Ctx) {
	at := time.Now().Add(timeout)
	if t, ok := parent.Deadline(); ok && !t.After(at) {
		return parent, nil
	}
	c := p.Get(parent, at, timeout)
	return c, c
}

// tickFor returns a tick whose deadline is at most at and less than a
// tick before it: the newest one if it is, else a new one, which becomes
// the newest.
func (p *Pool) tickFor(at time.Time, timeout time.Duration) *tick {
	cur := p.tick.Load()
	if cur != nil && !cur.at.After(at) && at.Sub(cur.at) < Of(timeout) {
		return cur
	}
	t := &tick{at: at, done: make(chan struct{})}
	time.AfterFunc(time.Until(at), func() { close(t.done) })
	// Another call may have made a tick meanwhile: either serves the
	// calls to come, and each caller keeps its own.
	p.tick.CompareAndSwap(cur, t)
	return t
}

// Put ends c's use: c goes back to the pool, unless its deadline passed
// (or c is nil).
// A call abandoned at its deadline may still be in the callee's hands
// (queued in a pipeline, or waiting for a connection), which would read
// the context after the caller left; only a call that returned in time is
// surely done with it.
func (p *Pool) Put(c *Ctx) {
	if c == nil || c.Err() != nil {
		return
	}
	c.parent, c.tick = nil, nil
	p.pool.Put(c)
}

// Deadline implements context.Context.
func (c *Ctx) Deadline() (time.Time, bool) { return c.tick.at, true }

// Done implements context.Context: it is closed at the deadline.
func (c *Ctx) Done() <-chan struct{} { return c.tick.done }

// Err implements context.Context.
func (c *Ctx) Err() error {
	select {
	case <-c.tick.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Value implements context.Context with the parent's values.
func (c *Ctx) Value(key any) any { return c.parent.Value(key) }

// Ended reports whether err is a context's ending, context.Canceled or
// context.DeadlineExceeded, wrapped or not: a caller that went away or ran
// out of time, which the limiters and adapters tell from a failure.
func Ended(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Expired returns ctx's error, or context.DeadlineExceeded once ctx's
// deadline has passed even though ctx's timer has not closed Done yet. A
// client that keeps deadlines through its connection's (go-redis with
// ContextTimeoutEnabled) may return a timeout at the deadline before that
// timer fires: ctx.Err alone would then tell a caller that gave up from a
// store that failed by chance, and not the same way each time.
func Expired(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t, ok := ctx.Deadline(); ok && !time.Now().Before(t) {
		return context.DeadlineExceeded
	}
	return nil
}
