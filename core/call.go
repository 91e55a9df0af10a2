package core

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// call makes one store call for checks at cost n into results, returning by
// ctx's deadline whatever the store does. A store that keeps deadlines by
// itself ([Traits].KeepsDeadlines) is called on the caller's goroutine; any
// other runs on a goroutine of its own that the caller abandons at the
// deadline. A panic of the store becomes an error.
func (l *Limiter) call(ctx context.Context, checks []Check, n int, results []Result) error {
	if l.direct {
		return l.callDirect(ctx, checks, n, results)
	}
	// the call may outlive this function: it gets checks of its own
	res, err := l.callStore(ctx, slices.Clone(checks), n)
	return copyResults(results, res, err)
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

// callDirect makes one store call on the caller's goroutine into results.
// The store gets a pooled copy of checks, which it may not keep past the
// call, so that the caller's checks stay on its stack: an interface call
// would otherwise move them to the heap. A store that decides into a
// slice (AllowInto, see [Store]) decides into a pooled one, and allocates no results.
func (l *Limiter) callDirect(ctx context.Context, checks []Check, n int, results []Result) (err error) {
	buf := callPool.Get().(*callBuf)
	own := buf.checks[:copy(buf.checks[:], checks)]
	defer func() {
		clear(own)
		callPool.Put(buf)
		if p := recover(); p != nil {
			err = fmt.Errorf("ratekit: store panicked: %v", p)
		}
	}()
	if s, ok := l.store.(intoStore); ok {
		res := buf.results[:len(own)]
		if err := s.AllowInto(ctx, own, n, res); err != nil {
			return err
		}
		copy(results, res)
		return nil
	}
	res, err := l.store.AllowAllN(ctx, own, n)
	return copyResults(results, res, err)
}

// callBuf holds the checks and results of a direct store call.
type callBuf struct {
	checks  [maxChecks]Check
	results [maxChecks]Result
}

// callPool holds the buffers of direct store calls.
var callPool = sync.Pool{New: func() any { return new(callBuf) }}

// callStore makes one store call that returns by ctx's deadline whatever
// the store does: the call runs on a goroutine of its own, which the
// caller abandons at the deadline.
func (l *Limiter) callStore(ctx context.Context, checks []Check, n int) ([]Result, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return l.store.AllowAllN(ctx, checks, n)
	}
	l.wg.Add(1)
	l.mu.RUnlock()
	return l.spawn(ctx, checks, n)
}

// storeCall is one store call on its own goroutine.
type storeCall struct {
	results []Result
	err     error
	done    chan struct{}
}

// spawn runs a store call on a new goroutine, already counted in wg, and
// waits for it until ctx ends. A panic of the store becomes an error.
func (l *Limiter) spawn(ctx context.Context, checks []Check, n int) ([]Result, error) {
	c := &storeCall{done: make(chan struct{})}
	go func() {
		defer l.wg.Done()
		defer close(c.done)
		defer func() {
			if p := recover(); p != nil {
				c.err = fmt.Errorf("ratekit: store panicked: %v", p)
			}
		}()
		c.results, c.err = l.store.AllowAllN(ctx, checks, n)
	}()
	select {
	case <-c.done:
		return c.results, c.err
	case <-ctx.Done():
		select {
		case <-c.done: // answered at the last moment
			return c.results, c.err
		default:
		}
		return nil, ctx.Err()
	}
}
