package core

import (
	"context"
	"sync"
	"time"
)

// boundCtx is the deadline of a call to a store that keeps deadlines
// ([Traits].KeepsDeadlines), which the Limiter calls on the request's
// goroutine and which returns by the deadline on its own. It costs no
// allocation in the steady state, where context.WithTimeout costs four
// (the context, its timer, its done channel and the timer's function):
// a boundCtx is pooled with its timer and its done channel, and goes back
// to the pool after the call unless its timer fired (a closed channel
// cannot be reused).
//
// It carries parent's values and the Limiter's deadline, but not parent's
// cancellation: a caller that gives up during the call sees the call end
// by the deadline at the latest (a store that keeps deadlines through
// socket deadlines, as go-redis does, ends it no sooner anyway), and the
// Limiter then returns the caller's error. A boundCtx is only given to a
// call on the caller's goroutine, and reused once that call returned: a
// store that keeps deadlines must not keep its context past the call, as
// it must not keep its checks.
type boundCtx struct {
	parent context.Context
	at     time.Time
	done   chan struct{}
	timer  *time.Timer // closes done at the deadline
}

// boundTo returns a boundCtx of pool within parent, with deadline at,
// timeout from now. Each Limiter has a pool of its own, so that timers
// made in a testing/synctest bubble stay in it.
func boundTo(pool *sync.Pool, parent context.Context, at time.Time, timeout time.Duration) *boundCtx {
	c, _ := pool.Get().(*boundCtx)
	if c == nil {
		c = &boundCtx{done: make(chan struct{})}
		c.timer = time.AfterFunc(timeout, c.expire)
	} else {
		c.timer.Reset(timeout)
	}
	c.parent, c.at = parent, at
	return c
}

func (c *boundCtx) expire() { close(c.done) }

// release ends c's use: c goes back to pool unless its timer fired.
func (c *boundCtx) release(pool *sync.Pool) {
	if !c.timer.Stop() {
		return // fired, or firing: done is closed
	}
	c.parent = nil
	pool.Put(c)
}

// Deadline implements context.Context.
func (c *boundCtx) Deadline() (time.Time, bool) { return c.at, true }

// Done implements context.Context: it is closed at the deadline.
func (c *boundCtx) Done() <-chan struct{} { return c.done }

// Err implements context.Context.
func (c *boundCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Value implements context.Context with parent's values.
func (c *boundCtx) Value(key any) any { return c.parent.Value(key) }
