package outbound

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
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
	//go:embed scripts/fleet.lua
	fleetSrc string

	// The entry scripts run after state.lua, in one chunk.
	reserveScript = redis.NewScript(stateSrc + "\n" + reserveSrc)
	cancelScript  = redis.NewScript(stateSrc + "\n" + cancelSrc)
	pauseScript   = redis.NewScript(stateSrc + "\n" + pauseSrc)
	fleetScript   = redis.NewScript(fleetSrc)
)

// errTimeout is the error of a Redis call that missed its deadline.
var errTimeout = errors.New("ratekit: outbound: redis gave no answer within the deadline")

// run runs script on key with the config arguments and extra, within the
// Limiter's deadline, and tells the observers.
func (l *Limiter) run(ctx context.Context, script *redis.Script, key string, extra ...any) (any, error) {
	args := make([]any, 0, len(l.argv)+len(extra))
	args = append(append(args, l.argv...), extra...)
	return l.call(ctx, func(ctx context.Context) (any, error) {
		return script.Run(ctx, l.client, []string{key}, args...).Result()
	})
}

// call runs f within the Limiter's deadline, and returns by it whatever
// the client does: a client that keeps deadlines is called on the caller's
// goroutine, any other on a goroutine of its own, abandoned at the
// deadline (a turn it takes after all goes unused: it wastes the turn,
// never gives one twice).
func (l *Limiter) call(ctx context.Context, f func(context.Context) (any, error)) (any, error) {
	start := l.now()
	cctx, cancel := context.WithTimeout(ctx, l.cfg.timeout)
	defer cancel()
	var reply any
	var err error
	if l.keeps {
		reply, err = f(cctx)
	} else {
		reply, err = l.detached(cctx, f)
	}
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		err = fmt.Errorf("%w: %w", errTimeout, context.DeadlineExceeded)
	}
	l.redisCalled(l.now().Sub(start), err)
	return reply, err
}

// detached runs f on a goroutine of its own and waits for it until ctx
// ends.
func (l *Limiter) detached(ctx context.Context, f func(context.Context) (any, error)) (any, error) {
	type result struct {
		reply any
		err   error
	}
	done := make(chan result, 1)
	var abandoned atomic.Bool
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		r, err := f(context.WithoutCancel(ctx))
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
		if !ok || n < 0 {
			return nil, fmt.Errorf("%w: %s replied %v", core.ErrMalformedReply, script, a)
		}
		out[i] = n
	}
	return out, nil
}

// parseReserve reads reserve.lua's reply.
func parseReserve(v any) (reply, error) {
	f, err := parseInts("reserve", v, 6)
	if err != nil {
		return reply{}, err
	}
	if f[0] > 1 || f[3] == 0 {
		return reply{}, fmt.Errorf("%w: reserve replied %v", core.ErrMalformedReply, f)
	}
	us := func(x int64) time.Duration { return time.Duration(x) * time.Microsecond }
	return reply{granted: f[0] == 1, wait: us(f[1]), act: f[2], iv: f[3], ahead: us(f[4]), pause: us(f[5])}, nil
}

// reserveArgs returns the arguments of reserve.lua past the config's.
func reserveArgs(n int, maxWait time.Duration, share int, floor time.Duration) []any {
	mw := int64(-1)
	if maxWait >= 0 {
		mw = maxWait.Microseconds()
	}
	return []any{strconv.Itoa(n), strconv.FormatInt(mw, 10), strconv.Itoa(share),
		strconv.FormatInt(max(floor.Microseconds(), 0), 10)}
}
