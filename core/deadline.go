package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// bounds makes the deadlines of a Limiter's calls to a store that keeps
// deadlines ([Traits].KeepsDeadlines), which the Limiter calls on the
// request's goroutine and which returns by the deadline on its own. Such a
// deadline costs no allocation and no timer of its own in the steady state,
// where context.WithTimeout costs four allocations (the context, its timer,
// its done channel and the timer's function) and a timer set and stopped
// on every call: each call gets a pooled boundCtx, and the calls that start
// within a tick of one another share one deadline, the first one's, kept by
// one timer (see deadlineTick).
//
// Each Limiter has bounds of its own, so that timers made in a
// testing/synctest bubble stay in it.
type bounds struct {
	pool sync.Pool                    // of *boundCtx
	tick atomic.Pointer[deadlineTick] // the newest tick, nil before the first call
}

// deadlineTick is one deadline shared by the calls that start within a
// tick of the first: their own deadlines are at most a tick later than at,
// so that sharing it moves a call's deadline earlier by less than a tick,
// never later. done is closed at at by a timer that nothing stops: a tick
// nobody uses any longer ends by itself.
type deadlineTick struct {
	at   time.Time
	done chan struct{}
}

// tickOf is how far apart, at most, the deadlines of calls sharing one tick
// are under a timeout: a 64th of it (under 1 ms for the default 50 ms), so
// that a store call keeps at least 98% of its time. Under a steady load, a
// Limiter thus sets about 64 timers per timeout instead of one per call.
func tickOf(timeout time.Duration) time.Duration { return timeout / 64 }

// boundCtx is the context of a call to a store that keeps deadlines. It
// carries parent's values and the deadline of its tick, but not parent's
// cancellation: a caller that gives up during the call sees the call end
// by the deadline at the latest (a store that keeps deadlines through
// socket deadlines, as go-redis does, ends it no sooner anyway), and the
// Limiter then returns the caller's error. A boundCtx is only given to a
// call on the caller's goroutine, and reused once that call returned: a
// store that keeps deadlines must not keep its context past the call, as
// it must not keep its checks.
type boundCtx struct {
	parent context.Context
	tick   *deadlineTick
}

// bound returns a boundCtx within parent for a call whose deadline under
// timeout is at: its own deadline is at most at, and less than a tick
// before it.
// It costs no allocation unless the last boundCtx released expired, or a
// new tick begins.
func (b *bounds) bound(parent context.Context, at time.Time, timeout time.Duration) *boundCtx {
	c, _ := b.pool.Get().(*boundCtx)
	if c == nil {
		c = new(boundCtx)
	}
	c.parent, c.tick = parent, b.tickFor(at, timeout)
	return c
}

// tickFor returns a tick whose deadline is at most at and less than a
// tick before it: the newest one if it is, else a new one, which becomes
// the newest.
func (b *bounds) tickFor(at time.Time, timeout time.Duration) *deadlineTick {
	cur := b.tick.Load()
	if cur != nil && !cur.at.After(at) && at.Sub(cur.at) < tickOf(timeout) {
		return cur
	}
	t := &deadlineTick{at: at, done: make(chan struct{})}
	time.AfterFunc(time.Until(at), func() { close(t.done) })
	// Another call may have made a tick meanwhile: either serves the
	// calls to come, and each caller keeps its own.
	b.tick.CompareAndSwap(cur, t)
	return t
}

// release ends c's use: c goes back to b's pool, unless its deadline
// passed. A call abandoned at its deadline may still be in the store's
// hands (queued in a pipeline, or waiting for a connection), which would
// read the context after the caller left; only a call that returned in
// time is surely done with it.
func (b *bounds) release(c *boundCtx) {
	if c.Err() != nil {
		return
	}
	c.parent, c.tick = nil, nil
	b.pool.Put(c)
}

// Deadline implements context.Context.
func (c *boundCtx) Deadline() (time.Time, bool) { return c.tick.at, true }

// Done implements context.Context: it is closed at the deadline.
func (c *boundCtx) Done() <-chan struct{} { return c.tick.done }

// Err implements context.Context.
func (c *boundCtx) Err() error {
	select {
	case <-c.tick.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Value implements context.Context with parent's values.
func (c *boundCtx) Value(key any) any { return c.parent.Value(key) }
