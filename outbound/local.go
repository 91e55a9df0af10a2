package outbound

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratekit/ratekit/core"
)

// recoveryWindow is how long after its last local turn a process takes
// turns from Redis at its share of the rate only: long enough for every
// other process to notice that Redis is back (each probes within the
// breaker's open time of it), so that Redis's turns and the local turns of
// the processes not back yet never add up to more than the rate.
func (l *Limiter) recoveryWindow() time.Duration { return l.cfg.openFor + l.cfg.timeout }

// recovering returns the share and floor of a Redis call: 1 and 0 normally;
// after local turns, the fleet's size for the recovery window, and, while
// this process's local turns of the key lie ahead, the time after its last
// one, so that no turn Redis hands out falls among them.
func (l *Limiter) recovering(ks *keyState) (share int, floor time.Duration) {
	last := l.lastLocal.Load()
	if last == 0 {
		return 1, 0
	}
	now := l.now()
	share = 1
	if now.Sub(time.Unix(0, last)) < l.recoveryWindow() {
		share = max(l.fleetShare(), 1)
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.local != nil && ks.localEnd.After(now) {
		floor = ks.localEnd.Add(ks.localIV).Sub(now)
	}
	return share, floor
}

// backOnRedis drops the local limiter of ks once Redis decided again with
// floor past its last local turn.
func (l *Limiter) backOnRedis(ks *keyState, floor time.Duration) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.local != nil && (floor > 0 || !ks.localEnd.After(l.now())) {
		ks.local = nil
		ks.localEnd = time.Time{}
	}
}

// fleetShare returns how many processes share the limit: the larger of
// the size told and the size learned, 0 if neither is known.
func (l *Limiter) fleetShare() int {
	return max(l.cfg.fleet, int(l.learned.Load()))
}

// takeLocal reserves n units of ks from this process's share of the rate,
// for when Redis cannot decide.
func (l *Limiter) takeLocal(ks *keyState, n int, maxWait time.Duration) (turn, error) {
	share := l.fleetShare()
	if share == 0 {
		return turn{}, fmt.Errorf("%w: redis cannot decide and this process knows no fleet size to take its share of %s (see WithFleetSize)", core.ErrUnavailable, l.name)
	}
	now := l.now()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.local == nil || ks.localShare != share {
		l.newLocal(ks, share, now)
	}
	if n > ks.local.Burst() {
		return turn{}, fmt.Errorf("%w: %d units exceed this process's share of the burst, %d, while redis cannot decide", core.ErrUnavailable, n, ks.local.Burst())
	}
	at := latest(now, ks.localStart, ks.pauseUntil)
	r := ks.local.ReserveN(at, n)
	wait := r.DelayFrom(now)
	if maxWait >= 0 && wait > maxWait {
		r.CancelAt(at)
		return turn{wait: wait, degraded: true}, nil
	}
	wake := now.Add(wait)
	if wake.After(ks.localEnd) {
		ks.localEnd = wake
	}
	l.lastLocal.Store(now.UnixNano())
	return turn{ok: true, wake: wake, wait: wait, local: r, localAt: at, degraded: true}, nil
}

// newLocal gives ks a local limiter at share of the rate, holding no turn
// before the end of the fleet's schedule as last seen: the turns the fleet
// handed out before Redis failed still go.
func (l *Limiter) newLocal(ks *keyState, share int, now time.Time) {
	perSec := l.localShare(share)
	burst := max(l.limit.burst()/share, 1)
	ks.local = rate.NewLimiter(rate.Limit(perSec), burst)
	ks.localShare = share
	ks.localIV = time.Duration(float64(time.Second) / perSec)
	ks.localStart = latest(now, ks.horizon, ks.localEnd)
	ks.local.ReserveN(ks.localStart, burst) // empty at the start
}

// localShare returns the rate of one process's share, in units per
// second: a whole number of units per period, Rate/share rounded down, so
// that the processes, which are not in step, cannot together put more
// than Rate in any one period (each puts at most its whole share there). A
// Rate below the fleet's size gives each Rate/share, which keeps the fleet
// under Rate on average only.
func (l *Limiter) localShare(share int) float64 {
	per := l.limit.Rate / share
	if per == 0 {
		return l.localPerSec / float64(share)
	}
	return l.localPerSec * float64(per) / float64(l.limit.Rate)
}

// cancelLocal gives a local turn back.
func (l *Limiter) cancelLocal(ks *keyState, t turn) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	t.local.CancelAt(latest(l.now(), t.localAt))
}

// cancelRedis gives a Redis turn back (see Reservation.Cancel).
func (l *Limiter) cancelRedis(ctx context.Context, ks *keyState, n int, t turn) error {
	if !t.ok {
		return nil
	}
	_, err := l.run(ctx, cancelScript, ks.key, fmt.Sprint(n), fmt.Sprint(t.act), fmt.Sprint(t.iv))
	if err != nil {
		return fmt.Errorf("ratekit: outbound: cancel: %w", err)
	}
	return nil
}

// latest returns the latest of times.
func latest(times ...time.Time) time.Time {
	var m time.Time
	for _, t := range times {
		if t.After(m) {
			m = t
		}
	}
	return m
}
