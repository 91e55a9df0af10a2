package outbound

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/pipebatch"
	"github.com/ratekit/ratekit/internal/tickctx"
)

var (
	//go:embed scripts/state.lua
	stateSrc string
	//go:embed scripts/reserve.lua
	reserveSrc string
	//go:embed scripts/cancel.lua
	cancelSrc string
	//go:embed scripts/pause.lua
	pauseSrc string
	//go:embed scripts/paused.lua
	pausedSrc string
	//go:embed scripts/fleet.lua
	fleetSrc string

	// The entry scripts run after state.lua, in one chunk.
	reserveScriptSrc = stateSrc + "\n" + reserveSrc
	reserveScript    = redis.NewScript(reserveScriptSrc)
	reserveSHA       = reserveScript.Hash()
	cancelScript     = redis.NewScript(stateSrc + "\n" + cancelSrc)
	pauseScript      = redis.NewScript(stateSrc + "\n" + pauseSrc)
	pausedScriptSrc  = stateSrc + "\n" + pausedSrc
	pausedScript     = redis.NewScript(pausedScriptSrc)
	pausedSHA        = pausedScript.Hash()
	fleetScript      = redis.NewScript(fleetSrc)
)

// errTimeout is the error of a Redis call that missed its deadline.
var errTimeout = errors.New("ratekit: outbound: redis gave no answer within the deadline")

// processor is the method through which the Limiter sends reservations
// when the client has it (*redis.Client, *redis.ClusterClient and
// *redis.Ring do): it runs the client's hooks like any command, and reads
// the reply's integers as they are, without Script.Run's copies of the
// arguments and boxing of each integer. Concurrent reservations share
// pipelined round trips (see Limiter.batch).
type processor = pipebatch.Processor

// reserve runs reserve.lua on key for n units (see the script for the
// arguments), within the Limiter's deadline, and returns its reply.
func (l *Limiter) reserve(ctx context.Context, key string, n int, maxWait time.Duration, share int, floor time.Duration) (reply, error) {
	mw := int64(-1)
	if maxWait >= 0 {
		mw = maxWait.Microseconds()
	}
	floorUS := max(floor.Microseconds(), 0)
	proc, ok := l.client.(processor)
	if !ok {
		v, err := l.run(ctx, reserveScript, key, n, mw, share, floorUS)
		if err != nil {
			return reply{}, err
		}
		f, err := parseInts("reserve", v, 6)
		if err != nil {
			return reply{}, err
		}
		return parseReserve(f)
	}
	c := &reserveCall{l: l, proc: proc, mw: mw, floor: floorUS}
	// "evalsha", sha, 1, key, the config arguments, then reserve's own
	// (the 64-bit ones by pointer, which go-redis writes as it writes them,
	// where boxing one as an interface would allocate)
	c.args = append(append(append(c.buf[:0], "evalsha", reserveSHAArg, 1, key), l.argv...), n, &c.mw, share, &c.floor)
	if _, err := l.call(ctx, c); err != nil {
		return reply{}, err
	}
	f := c.f
	if err := checkInts("reserve", f, 6); err != nil {
		return reply{}, err
	}
	return parseReserve(f)
}

// reserveSHAArg is reserve's SHA as an argument, boxed once rather than on
// every call.
var reserveSHAArg any = reserveSHA

// reserveCall is one reservation's Redis call, with its arguments and its
// reply: one allocation where a closure, its arguments and its reply would
// each be one.
type reserveCall struct {
	l    *Limiter
	proc processor
	args []any
	buf  [16]any // room for args: 4, the 8 config arguments, then 4
	f    []int64 // the reply's integers

	mw, floor int64 // the longest wait and the floor (µs), which args point to
}

func (c *reserveCall) do(ctx context.Context) (any, error) {
	var err error
	if c.l.batch != nil {
		c.f, err = c.l.batch.Do(ctx, reserveScriptSrc, c.args)
	} else {
		c.f, err = pipebatch.Run(ctx, c.proc, reserveScriptSrc, c.args)
	}
	return nil, err
}

// redisCall is a Redis call that Limiter.call makes within the deadline.
type redisCall interface {
	do(ctx context.Context) (any, error)
}

// callFunc makes a function a redisCall.
type callFunc func(context.Context) (any, error)

func (f callFunc) do(ctx context.Context) (any, error) { return f(ctx) }

// run runs script on key with the config arguments and extra, within the
// Limiter's deadline, and tells the observers.
func (l *Limiter) run(ctx context.Context, script *redis.Script, key string, extra ...any) (any, error) {
	args := make([]any, 0, len(l.argv)+len(extra))
	args = append(append(args, l.argv...), extra...)
	return l.call(ctx, callFunc(func(ctx context.Context) (any, error) {
		return script.Run(ctx, l.client, []string{key}, args...).Result()
	}))
}

// call runs f within the Limiter's deadline, and returns by it whatever
// the client does: a client that keeps deadlines is called on the caller's
// goroutine, any other on a goroutine of its own, abandoned at the
// deadline (a turn it takes after all goes unused: it wastes the turn,
// never gives one twice).
//
// A client that keeps deadlines gets ctx itself when its deadline comes
// first, else a pooled deadline (package tickctx), which costs neither an
// allocation nor a timer of its own where context.WithTimeout costs four
// allocations and a timer. It carries ctx's values but not its
// cancellation: a caller that gives up during the call sees the call end
// by the Limiter's deadline at the latest, as go-redis, which keeps
// deadlines through the socket's, would end it anyway.
func (l *Limiter) call(ctx context.Context, f redisCall) (any, error) {
	start := l.now()
	var (
		reply any
		err   error
		cctx  context.Context
	)
	if l.keeps {
		var pooled *tickctx.Ctx
		cctx, pooled = l.deadlines.Within(ctx, l.cfg.timeout)
		defer l.deadlines.Put(pooled)
		reply, err = f.do(l.divert.Mark(cctx))
	} else {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, l.cfg.timeout)
		defer cancel()
		reply, err = l.detached(cctx, f)
	}
	// the caller gave up if its deadline passed, though go-redis, keeping
	// it on the connection, may time out before the context's timer
	// fires (see tickctx.Expired)
	if err != nil && tickctx.Expired(ctx) == nil && tickctx.Expired(cctx) != nil {
		err = fmt.Errorf("%w: %w", errTimeout, context.DeadlineExceeded)
	}
	l.redisCalled(l.now().Sub(start), err)
	return reply, err
}

// detached runs f on a goroutine of its own and waits for it until ctx
// ends.
func (l *Limiter) detached(ctx context.Context, f redisCall) (any, error) {
	type result struct {
		reply any
		err   error
	}
	done := make(chan result, 1)
	var abandoned atomic.Bool
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		r, err := f.do(context.WithoutCancel(ctx))
		if !abandoned.Load() {
			done <- result{r, err}
		}
	}()
	select {
	case r := <-done:
		return r.reply, r.err
	case <-ctx.Done():
		abandoned.Store(true)
		select {
		case r := <-done: // answered at the last moment
			return r.reply, r.err
		default:
		}
		return nil, ctx.Err()
	}
}

// redisCalled tells the observers and OnError of a Redis call.
func (l *Limiter) redisCalled(d time.Duration, err error) {
	for _, o := range l.cfg.observers {
		o.RedisCalled(l.name, d, err)
	}
	if err != nil && l.cfg.onError != nil {
		l.cfg.onError(err)
	}
}

// reply is reserve.lua's answer.
type reply struct {
	granted bool
	wait    time.Duration
	act     int64 // µs of Redis's clock
	iv      int64 // µs
	ahead   time.Duration
	pause   time.Duration
}

// parseInts reads a script's array of want integers.
func parseInts(script string, v any, want int) ([]int64, error) {
	a, ok := v.([]any)
	if !ok || len(a) != want {
		return nil, fmt.Errorf("%w: %s replied %T %v", core.ErrMalformedReply, script, v, v)
	}
	out := make([]int64, want)
	for i, x := range a {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: %s replied %v", core.ErrMalformedReply, script, a)
		}
		out[i] = n
	}
	return out, checkInts(script, out, want)
}

// checkInts returns an error unless f, a script's reply, holds want
// integers, none of them negative.
func checkInts(script string, f []int64, want int) error {
	if len(f) != want || slices.ContainsFunc(f, func(n int64) bool { return n < 0 }) {
		return fmt.Errorf("%w: %s replied %v", core.ErrMalformedReply, script, f)
	}
	return nil
}

// parseReserve reads reserve.lua's reply, six integers checkInts passed.
func parseReserve(f []int64) (reply, error) {
	if f[0] > 1 || f[3] == 0 {
		return reply{}, fmt.Errorf("%w: reserve replied %v", core.ErrMalformedReply, f)
	}
	us := func(x int64) time.Duration { return time.Duration(x) * time.Microsecond }
	return reply{granted: f[0] == 1, wait: us(f[1]), act: f[2], iv: f[3], ahead: us(f[4]), pause: us(f[5])}, nil
}
