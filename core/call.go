package core

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// call makes one store call for checks at cost n into results, sent at
// sent (the Limiter's mono time), returning by ctx's deadline whatever the
// store does. A store that keeps deadlines by itself
// ([Traits].KeepsDeadlines) is called on the caller's goroutine; any other
// runs on a goroutine of its own that the caller abandons at the deadline,
// and that call is returned as late: it goes on, and tells once it returns
// whether it spent. A panic of the store becomes an error.
func (l *Limiter) call(ctx context.Context, checks []Check, n int, results []Result, sent int64) (late *storeCall, _ error) {
	if l.direct {
		return nil, l.callDirect(ctx, checks, n, results)
	}
	// the call may outlive this function: it gets checks of its own
	c, err := l.callStore(ctx, slices.Clone(checks), n, sent)
	if err != nil {
		return c, err
	}
	return nil, copyResults(results, c.results, c.err)
}

// copyResults copies a store's answer into results, and returns err, or an
// error when the store answered with the wrong number of results.
func copyResults(results, res []Result, err error) error {
	if err != nil {
		return err
	}
	if len(res) != len(results) {
		return fmt.Errorf("%w: %d results for %d checks", ErrMalformedReply, len(res), len(results))
	}
	copy(results, res)
	return nil
}

// storePanicked is the error of a store call that panicked with p.
func storePanicked(p any) error { return fmt.Errorf("ratekit: store panicked: %v", p) }

// begin begins a store call of check at cost n (see [Store]): nil when
// the store did not begin it. A panic of the store becomes an error.
func (l *Limiter) begin(ctx context.Context, check Check, n int) (call any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = storePanicked(p)
		}
	}()
	return l.begins.Begin(ctx, check, n), nil
}

// finish waits for the answer of a store call that begin began. A panic of
// the store becomes an error.
func (l *Limiter) finish(ctx context.Context, call any, check Check, n int) (r Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = storePanicked(p)
		}
	}()
	return l.begins.Finish(ctx, call, check, n)
}

// callDirect makes one store call on the caller's goroutine into results.
// The store gets a pooled copy of checks, which it may not keep past the
// call, so that the caller's checks stay on its stack: an interface call
// would otherwise move them to the heap. A store that decides into a
// slice (AllowInto, see [Store]) decides into a pooled one, and allocates no
// results. A group of more than pooledChecks checks allocates its own.
func (l *Limiter) callDirect(ctx context.Context, checks []Check, n int, results []Result) (err error) {
	var (
		buf *callBuf
		own []Check
		res []Result
	)
	into, isInto := l.store.(intoStore)
	switch {
	case len(checks) <= pooledChecks:
		buf = callPool.Get().(*callBuf)
		own, res = buf.checks[:len(checks)], buf.results[:len(checks)]
	case isInto:
		own, res = make([]Check, len(checks)), make([]Result, len(checks))
	default: // AllowAllN returns results of its own
		own = make([]Check, len(checks))
	}
	copy(own, checks)
	defer func() {
		if buf != nil {
			clear(own)
			callPool.Put(buf)
		}
		if p := recover(); p != nil {
			err = storePanicked(p)
		}
	}()
	if isInto {
		if err := into.AllowInto(ctx, own, n, res); err != nil {
			return err
		}
		copy(results, res)
		return nil
	}
	res, err = l.store.AllowAllN(ctx, own, n)
	return copyResults(results, res, err)
}

// pooledChecks is the most checks a direct store call takes from its
// pool; a larger group allocates its own.
const pooledChecks = 4

// callBuf holds the checks and results of a direct store call.
type callBuf struct {
	checks  [pooledChecks]Check
	results [pooledChecks]Result
}

// callPool holds the buffers of direct store calls.
var callPool = sync.Pool{New: func() any { return new(callBuf) }}

// callStore makes one store call that returns by ctx's deadline whatever
// the store does: the call runs on a goroutine of its own, which the
// caller abandons at the deadline. It returns the call, and ctx's error
// when the caller abandoned it.
func (l *Limiter) callStore(ctx context.Context, checks []Check, n int, sent int64) (*storeCall, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		c := &storeCall{checks: checks, n: n, ended: true}
		c.results, c.err = l.store.AllowAllN(ctx, checks, n)
		return c, nil
	}
	l.wg.Add(1)
	l.mu.RUnlock()
	return l.spawn(ctx, checks, n, sent)
}

// storeCall is one store call on its own goroutine, or one whose outcome
// the caller could not learn: what a refund of its units needs to know.
type storeCall struct {
	results []Result
	err     error
	done    chan struct{}

	checks []Check // the call's own, in the order of the group's rules
	n      int
	sent   int64 // the Limiter's mono time when the call was made

	mu    sync.Mutex
	ended bool // results and err are set
	// refunds are the checks whose units a Refund gave back before the
	// call returned: the call's goroutine gives back what it spent of
	// them once it returns
	refunds []int
}

// spawn runs a store call on a new goroutine, already counted in wg, and
// waits for it until ctx ends. A panic of the store becomes an error. It
// returns the call, and ctx's error when the call is still running: the
// goroutine then finishes it, and refunds what a Refund asked of it
// meanwhile.
func (l *Limiter) spawn(ctx context.Context, checks []Check, n int, sent int64) (*storeCall, error) {
	c := &storeCall{done: make(chan struct{}), checks: checks, n: n, sent: sent}
	go func() {
		defer l.wg.Done()
		func() {
			defer func() {
				if p := recover(); p != nil {
					c.err = storePanicked(p)
				}
			}()
			c.results, c.err = l.store.AllowAllN(ctx, checks, n)
		}()
		c.mu.Lock()
		c.ended = true
		refunds := c.refunds
		c.mu.Unlock()
		close(c.done)
		if len(refunds) > 0 {
			l.refundStore(c, refunds)
		}
	}()
	select {
	case <-c.done:
		return c, nil
	case <-ctx.Done():
		select {
		case <-c.done: // answered at the last moment
			return c, nil
		default:
		}
		return c, ctx.Err()
	}
}

// unknownCall returns a store call on the caller's goroutine that failed
// with err after it was sent at sent: whether it spent is unknown, and
// will stay so.
func unknownCall(checks []Check, n int, sent int64, err error) *storeCall {
	return &storeCall{checks: slices.Clone(checks), n: n, sent: sent, err: err, ended: true}
}
