package outbound

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/redistest"
)

// TestPausesMissedWhileUnsubscribed: a pause published while a process is
// not subscribed still voids the turn one of its waits sleeps to, whether
// the subscription was lost (a killed connection, while the pause was set
// without publishing) or never made (Redis could not be reached at New,
// and the wait took a turn of the process's own share). Subscribed again,
// the process reads the pause from Redis; the wait takes a turn after it.
func TestPausesMissedWhileUnsubscribed(t *testing.T) {
	limit := Limit{Rate: 1, Period: 2 * time.Second}
	const pauseFor = 3 * time.Second // longer than the sleeper's wait
	t.Run("lost", func(t *testing.T) {
		srv := redistest.StartServer(t)
		rdb := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
		b := mustNew(t, rdb, limit, WithMargin(0))
		a := mustNew(t, rdb, limit, WithMargin(0), withoutSubscribe())
		redistest.AwaitSubscribers(t, b.channel, 1, 10*time.Second, rdb)
		missedPause(t, a, b, pauseFor, func() {
			if err := rdb.ClientKillByFilter(t.Context(), "TYPE", "pubsub").Err(); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("never made", func(t *testing.T) {
		srv := redistest.StartServer(t)
		var down atomic.Bool
		down.Store(true)
		var dialer net.Dialer
		unreachable := srv.Client(t, func(o *redis.Options) {
			o.ContextTimeoutEnabled = true
			o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if down.Load() {
					return nil, errors.New("unreachable")
				}
				return dialer.DialContext(ctx, network, addr)
			}
		})
		b := mustNew(t, unreachable, limit, WithMargin(0), WithFleetSize(1))
		a := mustNew(t, srv.Client(t), limit, WithMargin(0))
		missedPause(t, a, b, pauseFor, func() { down.Store(false) })
	})
}

// missedPause has b take a turn of key k and sleep to the next, has a
// pause k for pauseFor, then calls subscribe, after which b must hear of
// the pause: b's wait must end after it.
func missedPause(t *testing.T, a, b *Limiter, pauseFor time.Duration, subscribe func()) {
	t.Helper()
	ctx := t.Context()
	if err := b.Wait(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	woke := make(chan time.Time, 1)
	go func() {
		if err := b.Wait(ctx, "k"); err != nil {
			t.Error(err)
		}
		woke <- time.Now()
	}()
	for b.sleeping.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// the pause ends pauseFor after Redis's now, which is after start
	// (Redis runs on this machine's clock)
	start := time.Now()
	if err := a.Pause(ctx, "k", pauseFor); err != nil {
		t.Fatal(err)
	}
	subscribe()
	if at := <-woke; at.Before(start.Add(pauseFor)) {
		t.Errorf("the wait ended %v after the pause began, inside it (%v)", at.Sub(start), pauseFor)
	}
}
