package redisstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/redisstore"
)

// watchWait bounds how long a test waits for a reset to be heard: far
// beyond what delivery takes, so that only a lost message fails.
const watchWait = 20 * time.Second

// watch starts watching s and returns the channel of keys heard.
func watch(t *testing.T, s core.QuotaStore) <-chan string {
	t.Helper()
	heard := make(chan string, 16)
	stop, err := s.WatchResets(func(key string) { heard <- key })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return heard
}

// awaitSubscribed waits until the servers count n subscribers of
// ResetChannel in all, so that no reset published later is missed.
func awaitSubscribed(t *testing.T, n int64, clients ...*redis.Client) {
	t.Helper()
	redistest.AwaitSubscribers(t, redisstore.ResetChannel, n, watchWait, clients...)
}

// awaitKey waits for key among the keys heard.
func awaitKey(t *testing.T, heard <-chan string, key string) {
	t.Helper()
	deadline := time.After(watchWait)
	for {
		select {
		case k := <-heard:
			if k == key {
				return
			}
		case <-deadline:
			t.Fatalf("reset of %q not heard within %v", key, watchWait)
		}
	}
}

// resetAcross spends key through a, resets it through b, and requires a's
// watcher to hear it and a to find the key full.
func resetAcross(t *testing.T, a, b *redisstore.Store, key string, heard <-chan string) {
	t.Helper()
	ctx := t.Context()
	limit := core.PerHour(3)
	if r, err := testkit.AllowOne(a, ctx, key, limit, 3); err != nil || !r.Allowed {
		t.Fatalf("spend: %+v, %v", r, err)
	}
	if err := b.Reset(ctx, key); err != nil {
		t.Fatal(err)
	}
	awaitKey(t, heard, key)
	res, err := a.PeekAll(ctx, []core.Check{{Key: key, Limit: limit}})
	if err != nil || res[0].Remaining != 3 {
		t.Fatalf("peek after the reset: %+v, %v; want 3 remaining", res, err)
	}
}

func TestWatchResetsAcrossClients(t *testing.T) {
	srv := redistest.StartServer(t)
	c1, c2 := srv.Client(t), srv.Client(t)
	a, b := testkit.MustRedis(c1), testkit.MustRedis(c2)
	t.Cleanup(func() { a.Close(); b.Close() })
	heard := watch(t, a)
	awaitSubscribed(t, 1, c1)
	resetAcross(t, a, b, testkit.UniqueKey(t, "watch"), heard)
}

// TestWatchResetsCluster resets a key whose master is not the node the
// watcher's subscription is connected to (the master of the channel's
// slot): Redis carries the message across the cluster bus.
func TestWatchResetsCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c1, c2 := cl.Client(t), cl.Client(t)
	a, b := testkit.MustRedis(c1), testkit.MustRedis(c2)
	t.Cleanup(func() { a.Close(); b.Close() })
	heard := watch(t, a)
	var nodes []*redis.Client
	for _, s := range cl.Servers() {
		nodes = append(nodes, s.Client(t))
	}
	awaitSubscribed(t, 1, nodes...)
	subNode := cl.MasterOf(t, redisstore.ResetChannel)
	var key string
	for i := 0; key == ""; i++ {
		k := testkit.UniqueKey(t, fmt.Sprint("watch", i))
		if cl.MasterOf(t, k).Addr() != subNode.Addr() {
			key = k
		}
	}
	resetAcross(t, a, b, key, heard)
}

// TestWatchResetsAfterALostSubscription shows that a watcher hears the
// empty key, which tells it that resets may have gone unheard, once
// go-redis has made the subscription anew after the server dropped it
// (CLIENT KILL TYPE pubsub): resets published in between reached nobody.
// The first subscription tells nothing.
func TestWatchResetsAfterALostSubscription(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	s := testkit.MustRedis(c)
	t.Cleanup(func() { s.Close() })
	heard := watch(t, s)
	awaitSubscribed(t, 1, c)
	first := testkit.UniqueKey(t, "first")
	if err := s.Reset(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-heard:
		if k != first {
			t.Fatalf("heard %q first, want the reset of %q", k, first)
		}
	case <-time.After(watchWait):
		t.Fatalf("reset of %q not heard within %v", first, watchWait)
	}
	admin := srv.Client(t)
	if err := admin.ClientKillByFilter(t.Context(), "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	awaitKey(t, heard, "")
	awaitSubscribed(t, 1, c)
	key := testkit.UniqueKey(t, "resubscribed")
	if err := s.Reset(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	awaitKey(t, heard, key)
}

// TestWatchResetsGoroutines shows that the store's subscription goroutine
// ends with the last stop and with Close, and that a watcher no longer
// hears resets once stopped.
func TestWatchResetsGoroutines(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := testkit.MustRedis(c)
	heard1, heard2 := make(chan string, 4), make(chan string, 4)
	stop1, err1 := s.WatchResets(func(k string) { heard1 <- k })
	stop2, err2 := s.WatchResets(func(k string) { heard2 <- k })
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	awaitSubscribed(t, 1, c)
	key := testkit.UniqueKey(t, "goroutines")
	if err := s.Reset(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	awaitKey(t, heard1, key)
	awaitKey(t, heard2, key)
	stop1()
	stop1() // a second stop does nothing
	if err := s.Reset(t.Context(), key+"2"); err != nil {
		t.Fatal(err)
	}
	awaitKey(t, heard2, key+"2")
	if len(heard1) != 0 {
		t.Fatalf("a stopped watcher heard %q", <-heard1)
	}
	stop2()
	goleak.VerifyNone(t, goleak.IgnoreCurrent())

	_, err := s.WatchResets(func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WatchResets(func(string) {}); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("WatchResets after Close: %v, want ErrClosed", err)
	}
}

func TestQuotaNotSupported(t *testing.T) {
	c, _ := testkit.FakeRedis(t, testkit.NewClock(testkit.Start))
	s := testkit.MustRedis(testkit.ScripterOnly{Scripter: c})
	if _, err := s.WatchResets(func(string) {}); !errors.Is(err, core.ErrNotSupported) {
		t.Fatalf("WatchResets over a client without Subscribe: %v, want ErrNotSupported", err)
	}
	// reset works without a pipeline, one call a key
	key := testkit.UniqueKey(t, "scripter")
	if err := s.Reset(t.Context(), key, key+"2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(t.Context(), ""); !errors.Is(err, core.ErrInvalidIdentity) {
		t.Fatalf("Reset of an empty key: %v, want ErrInvalidIdentity", err)
	}
	plain := storeOnly{testkit.MustMemory()}
	l := testkit.MustLeasing(plain)
	t.Cleanup(func() { l.Close() })
	checks := []core.Check{{Key: key, Limit: core.PerHour(3)}}
	if _, err := l.PeekAll(t.Context(), checks); !errors.Is(err, core.ErrNotSupported) {
		t.Errorf("PeekAll over a plain Store: %v, want ErrNotSupported", err)
	}
	if _, err := l.RefundAllN(t.Context(), checks, 1); !errors.Is(err, core.ErrNotSupported) {
		t.Errorf("RefundAllN over a plain Store: %v, want ErrNotSupported", err)
	}
	if err := l.Reset(t.Context(), key); !errors.Is(err, core.ErrNotSupported) {
		t.Errorf("Reset over a plain Store: %v, want ErrNotSupported", err)
	}
	if _, err := l.WatchResets(func(string) {}); !errors.Is(err, core.ErrNotSupported) {
		t.Errorf("WatchResets over a memorystore.Store: %v, want ErrNotSupported", err)
	}
}

// storeOnly hides every method of a store but AllowAllN.
type storeOnly struct{ core.Store }

// TestGCRABareTAT reads a key as written before GCRA keys carried their
// interval, a bare TAT: it counts under the current interval.
func TestGCRABareTAT(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	c, _ := testkit.FakeRedis(t, clock)
	s := testkit.MustRedis(c)
	limit := core.PerMinute(10) // 6 s a unit
	key := testkit.UniqueKey(t, "bare")
	tat := clock.Now().Add(30 * time.Second).UnixMicro() // 5 units spent
	if err := c.Set(t.Context(), key, fmt.Sprint(tat), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := testkit.AllowOne(s, t.Context(), key, limit, 1)
	if err != nil || !r.Allowed || r.Remaining != 4 {
		t.Fatalf("a unit after 5 spent: %+v, %v; want allowed, 4 remaining", r, err)
	}
	if got, want := c.Get(t.Context(), key).Val(), fmt.Sprintf("%d\x006000000", tat); got != want {
		t.Fatalf("stored %q, want %q", got, want)
	}
}

// TestLeasingStoreHearsResets: a leasestore.Store watching resets drops its
// remembered denial of a key reset through another store, and every one
// once its subscription is back after a loss, during which the key was
// reset unheard (here deleted behind its back).
func TestLeasingStoreHearsResets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reset func(t *testing.T, srv *redistest.Server, other *redisstore.Store, key string, heard <-chan string)
	}{
		{"published", func(t *testing.T, _ *redistest.Server, other *redisstore.Store, key string, heard <-chan string) {
			if err := other.Reset(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			awaitKey(t, heard, key)
		}},
		{"unheard", func(t *testing.T, srv *redistest.Server, _ *redisstore.Store, _ string, heard <-chan string) {
			admin := srv.Client(t)
			if err := admin.FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			if err := admin.ClientKillByFilter(t.Context(), "TYPE", "pubsub").Err(); err != nil {
				t.Fatal(err)
			}
			awaitKey(t, heard, "") // subscribed again
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			c1, c2 := srv.Client(t), srv.Client(t)
			inner, other := testkit.MustRedis(c1), testkit.MustRedis(c2)
			l := testkit.MustLeasing(inner, leasestore.WithHold(time.Hour))
			t.Cleanup(func() { l.Close(); inner.Close(); other.Close() })
			heard := watch(t, l)
			awaitSubscribed(t, 1, c1)
			key, limit := testkit.UniqueKey(t, "lease-watch"), core.PerHour(2)
			for i, want := range []bool{true, true, false} {
				if r, err := testkit.AllowOne(l, t.Context(), key, limit, 1); err != nil || r.Allowed != want {
					t.Fatalf("unit %d: %+v, %v; want allowed %v", i+1, r, err, want)
				}
			}
			tc.reset(t, srv, other, key, heard)
			if r, err := testkit.AllowOne(l, t.Context(), key, limit, 1); err != nil || !r.Allowed {
				t.Fatalf("a unit after the reset: %+v, %v; want allowed (the remembered denial dropped)", r, err)
			}
		})
	}
}
