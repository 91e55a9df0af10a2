package outbound

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratekit/ratekit/internal/tickctx"
)

// errVoided is a turn that a pause made since voids.
var errVoided = errors.New("ratekit: outbound: turn voided by a pause")

// errLate is a turn woken up to too late to use: acting then could put
// more than the rate in the upstream's window.
var errLate = errors.New("ratekit: outbound: woke too late for the turn")

// turn is one reservation: from Redis or, degraded, from the local share.
type turn struct {
	ok       bool
	wake     time.Time     // when to act, on the local clock
	wait     time.Duration // from when it was decided to wake
	act      int64         // Redis: the time to act, µs of Redis's clock
	iv       int64         // Redis: the interval of the call, µs
	local    *rate.Reservation
	localAt  time.Time // the time local was asked at
	degraded bool
}

// Wait is shorthand for WaitN(ctx, key, 1).
func (l *Limiter) Wait(ctx context.Context, key string) error {
	return l.WaitN(ctx, key, 1)
}

// WaitN blocks until n units of key may go, the caller's turn on the
// schedule every process shares, and returns nil then. It returns at once,
// reserving nothing, with an error wrapping [ErrWouldExceedDeadline] if the
// turn would come after ctx's deadline, and with an error wrapping
// [ErrExceedsBurst] for n above the Limit's burst. If ctx ends while it
// waits, the turn is given back as far as nobody took a turn after it
// ([Reservation.Cancel]) and WaitN returns ctx's error. A pause of the key
// set while it waits (by any process) voids the turn if it falls in the
// pause: WaitN then takes a new turn after it, within the same deadline.
// It also returns an error for an empty key, when Redis refuses the call
// (wrapping core.ErrKeyRejected), and when Redis cannot decide and this
// process knows no share of the rate (wrapping core.ErrUnavailable).
func (l *Limiter) WaitN(ctx context.Context, key string, n int) error {
	deadline, _ := ctx.Deadline()
	return l.waitUntil(ctx, key, n, deadline)
}

// waitUntil is WaitN with the latest time to act given apart from ctx's
// deadline (zero: none).
func (l *Limiter) waitUntil(ctx context.Context, key string, n int, actBy time.Time) error {
	if err := l.check(ctx, n); err != nil {
		return err
	}
	skey, err := l.Key(key)
	if err != nil {
		return err
	}
	ks := l.acquire(skey)
	defer l.release(ks)
	start := l.now()
	degraded := false
	for {
		t, err := l.take(ctx, ks, n, actBy)
		if err != nil {
			l.waited(start, outcomeOf(err), degraded)
			return err
		}
		degraded = degraded || t.degraded
		if !t.ok {
			l.waited(start, OutcomeGaveUp, degraded)
			return fmt.Errorf("%w: %d units of %s would wait %v", ErrWouldExceedDeadline, n, l.name, t.wait)
		}
		err = l.sleep(ctx, ks, t)
		if errors.Is(err, errVoided) || errors.Is(err, errLate) {
			continue
		}
		if err != nil {
			l.cancelTurn(context.WithoutCancel(ctx), ks, n, t)
			l.waited(start, OutcomeCanceled, degraded)
			return err
		}
		l.waited(start, OutcomeGranted, degraded)
		return nil
	}
}

// check refuses a wait that cannot start.
func (l *Limiter) check(ctx context.Context, n int) error {
	switch {
	case n < 1:
		return fmt.Errorf("ratekit: outbound: n %d (want at least 1)", n)
	case n > l.limit.burst():
		return fmt.Errorf("%w: n %d, burst %d", ErrExceedsBurst, n, l.limit.burst())
	case l.isClosed():
		return ErrClosed
	}
	return ctx.Err()
}

// anyTime is the actBy of a turn however far ahead.
var anyTime = time.Time{}

// maxWait returns the longest wait that ends by actBy, or -1 for any.
func (l *Limiter) maxWait(actBy time.Time) time.Duration {
	if actBy.IsZero() {
		return -1
	}
	return max(actBy.Sub(l.now()), 0)
}

// outcomeOf returns the outcome of a wait that ended in err.
func outcomeOf(err error) string {
	if tickctx.Ended(err) {
		return OutcomeCanceled
	}
	return OutcomeError
}

// sleep waits for t's time to act: nil when it comes, errVoided when a
// pause known meanwhile covers it, errLate when this process woke up to it
// later than the margin (stalled: a turn used that late could share
// the upstream's window with the turn one period after it), ctx's error if
// ctx ends first.
func (l *Limiter) sleep(ctx context.Context, ks *keyState, t turn) error {
	queued := false
	defer func() {
		if queued {
			l.queue(-1)
		}
	}()
	for {
		until, notify := ks.paused()
		if until.After(t.wake) {
			if t.local != nil {
				l.cancelLocal(ks, t)
			}
			return errVoided
		}
		d := t.wake.Sub(l.now())
		if d <= 0 {
			return ctx.Err()
		}
		if !queued {
			queued = true
			l.queue(1)
		}
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
			if late := l.now().Sub(t.wake); l.lateLimit > 0 && late > l.lateLimit {
				return errLate
			}
			return ctx.Err()
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-notify:
			timer.Stop()
		}
	}
}

// queue moves the count of sleepers by d and tells the observers.
func (l *Limiter) queue(d int64) {
	depth := l.sleeping.Add(d)
	for _, o := range l.cfg.observers {
		o.QueueChanged(l.name, int(depth))
	}
}

// waited tells the observers of a wait that ended.
func (l *Limiter) waited(start time.Time, outcome string, degraded bool) {
	if len(l.cfg.observers) == 0 {
		return
	}
	e := WaitEvent{Limiter: l.name, Wait: l.now().Sub(start), Outcome: outcome, Degraded: degraded}
	for _, o := range l.cfg.observers {
		o.Waited(e)
	}
}

// Allow is shorthand for AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (bool, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN reports whether n units of key may go now, and takes the turn if
// they may; a turn later than now reserves nothing. ctx bounds the Redis
// call. It returns an error wrapping [ErrExceedsBurst] for n above the
// burst, and the errors of [Limiter.WaitN] but the deadline's.
func (l *Limiter) AllowN(ctx context.Context, key string, n int) (bool, error) {
	if err := l.check(ctx, n); err != nil {
		return false, err
	}
	skey, err := l.Key(key)
	if err != nil {
		return false, err
	}
	ks := l.acquire(skey)
	defer l.release(ks)
	t, err := l.take(ctx, ks, n, l.now())
	switch {
	case err != nil:
		l.waited(l.now(), outcomeOf(err), false)
		return false, err
	case !t.ok || t.wake.After(l.now()):
		// a turn made while paused locally still waits: give it back
		if t.ok {
			l.cancelTurn(context.WithoutCancel(ctx), ks, n, t)
		}
		l.waited(l.now(), OutcomeGaveUp, t.degraded)
		return false, nil
	}
	l.waited(l.now(), OutcomeGranted, t.degraded)
	return true, nil
}

// Reservation is a turn taken by [Limiter.Reserve]: the time at which its
// holder may act, which it then sleeps to, or gives back with
// [Reservation.Cancel]. Unlike a wait, a Reservation's time stays as it
// was made when a pause is set later: use [Limiter.WaitN] to have pauses
// move it.
type Reservation struct {
	l  *Limiter
	ks *keyState
	n  int
	t  turn

	once sync.Once
}

// Reserve is shorthand for ReserveN(ctx, key, 1).
func (l *Limiter) Reserve(ctx context.Context, key string) (*Reservation, error) {
	return l.ReserveN(ctx, key, 1)
}

// ReserveN takes the next turn of n units of key, however far ahead, and
// returns it: act at [Reservation.TimeToAct], or call [Reservation.Cancel].
// ctx bounds the Redis call only. It returns an error wrapping
// [ErrExceedsBurst] for n above the burst, and the errors of
// [Limiter.WaitN] but the deadline's.
func (l *Limiter) ReserveN(ctx context.Context, key string, n int) (*Reservation, error) {
	if err := l.check(ctx, n); err != nil {
		return nil, err
	}
	skey, err := l.Key(key)
	if err != nil {
		return nil, err
	}
	ks := l.acquire(skey)
	defer l.release(ks)
	t, err := l.take(ctx, ks, n, anyTime)
	if err != nil {
		l.waited(l.now(), outcomeOf(err), false)
		return nil, err
	}
	l.waited(l.now(), OutcomeGranted, t.degraded)
	return &Reservation{l: l, ks: ks, n: n, t: t}, nil
}

// TimeToAct returns the time at which the holder may act, on this
// process's clock.
func (r *Reservation) TimeToAct() time.Time { return r.t.wake }

// Delay returns how long the holder must wait before it acts: 0 once the
// time to act has come.
func (r *Reservation) Delay() time.Duration { return max(r.t.wake.Sub(r.l.now()), 0) }

// Degraded reports that the turn was decided without Redis, by this
// process's share of the rate.
func (r *Reservation) Degraded() bool { return r.t.degraded }

// Cancel gives the turn back, as golang.org/x/time/rate's
// Reservation.Cancel does: nothing once its time to act has passed, and
// otherwise its units less those of the turns others took after it, so
// that nobody's turn moves and no unit is handed out twice. ctx bounds the
// Redis call; a call that fails gives nothing back and returns its error.
// Only the first call does anything.
func (r *Reservation) Cancel(ctx context.Context) error {
	var err error
	r.once.Do(func() { err = r.l.cancelTurn(ctx, r.ks, r.n, r.t) })
	return err
}

// cancelTurn gives t back.
func (l *Limiter) cancelTurn(ctx context.Context, ks *keyState, n int, t turn) error {
	if t.local != nil {
		l.cancelLocal(ks, t)
		return nil
	}
	return l.cancelRedis(ctx, ks, n, t)
}
