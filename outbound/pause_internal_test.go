package outbound

import (
	"context"
	"errors"
	"fmt"
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
	const pauseFor = 3 * time.Second // longer than the sleepers' waits
	for _, pipelines := range []bool{true, false} {
		// reads that share pipelines (and script runs), and reads one by
		// one through a client that cannot pipeline
		t.Run(fmt.Sprintf("lost/pipelines=%v", pipelines), func(t *testing.T) {
			srv := redistest.StartServer(t)
			rdb := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
			var client redis.Scripter = rdb
			if !pipelines {
				client = scriptsAndSubscribe{rdb, rdb}
			}
			b := mustNew(t, client, limit, WithMargin(0))
			if (b.batch != nil) != pipelines {
				t.Fatalf("batch %v, want %v", b.batch != nil, pipelines)
			}
			a := mustNew(t, rdb, limit, WithMargin(0), withoutSubscribe())
			redistest.AwaitSubscribers(t, b.channel, 1, 10*time.Second, rdb)
			missedPause(t, a, b, pauseFor, func() {
				if err := rdb.ClientKillByFilter(t.Context(), "TYPE", "pubsub").Err(); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
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

// scriptsAndSubscribe is a client that runs scripts and subscribes, but
// cannot pipeline.
type scriptsAndSubscribe struct {
	redis.Scripter
	sub subscriber
}

func (c scriptsAndSubscribe) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return c.sub.Subscribe(ctx, channels...)
}

// missedPause has b take a turn of each of three keys and sleep to the
// next, has a pause the keys for pauseFor, then calls subscribe, after
// which b must hear of the pauses: each of b's waits must end after its
// key's.
func missedPause(t *testing.T, a, b *Limiter, pauseFor time.Duration, subscribe func()) {
	t.Helper()
	ctx := t.Context()
	keys := []string{"k0", "k1", "k2"}
	firsts, woke := make(chan error, len(keys)), make(chan time.Time, len(keys))
	for _, key := range keys {
		go func() {
			err := b.Wait(ctx, key)
			firsts <- err
			if err != nil {
				return
			}
			if err := b.Wait(ctx, key); err != nil {
				t.Error(err)
			}
			woke <- time.Now()
		}()
	}
	for range keys {
		if err := <-firsts; err != nil {
			t.Fatal(err)
		}
	}
	// the second waits of every key asleep (a local share starts empty:
	// a first turn may have been a wait too)
	for b.sleeping.Load() < int64(len(keys)) {
		time.Sleep(time.Millisecond)
	}
	// each pause ends pauseFor after Redis's now, which is after start
	// (Redis runs on this machine's clock)
	start := time.Now()
	for _, key := range keys {
		if err := a.Pause(ctx, key, pauseFor); err != nil {
			t.Fatal(err)
		}
	}
	subscribe()
	for range keys {
		if at := <-woke; at.Before(start.Add(pauseFor)) {
			t.Errorf("a wait ended %v after the pause began, inside it (%v)", at.Sub(start), pauseFor)
		}
	}
}
