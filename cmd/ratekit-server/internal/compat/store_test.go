package compat_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/compat"
	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/luaproxy"
	"github.com/ratekit/ratekit/internal/pipebatch"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/redisstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func perMinute(n int) core.Limit {
	return core.Limit{Rate: n, Period: time.Minute, Burst: n, Algorithm: core.FixedWindow}
}

func newStore(t *testing.T, batch int) (*compat.Store, *redis.Client, *redistest.Server) {
	t.Helper()
	rs := redistest.StartServer(t)
	c := rs.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	if lua54 != nil {
		p := luaproxy.Start(t, rs.Addr())
		*lua54 = append(*lua54, p)
		c = redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
	}
	s, err := compat.New(c, compat.Options{Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c, rs
}

// TestExactConcurrent: 400 concurrent calls, each on a limit of 100 on
// one key and one of 1000 on a key of ten, let exactly 100 through and
// count all 400 on each key, as envoy counts them, with and without
// batching; with batching, calls share script runs.
func TestExactConcurrent(t *testing.T) {
	for _, batch := range []int{0, 4} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			s, c, _ := newStore(t, batch)
			runs := &callCounter{}
			c.AddHook(runs)
			var ok atomic.Int64
			var wg sync.WaitGroup
			for i := range 400 {
				wg.Go(func() {
					checks := []core.Check{{Key: "k", Limit: perMinute(100)}, {Key: fmt.Sprint("o", i%10), Limit: perMinute(1000)}}
					r, err := s.AllowAllN(context.Background(), checks, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if r[0].Allowed {
						ok.Add(1)
					}
					if !r[1].Allowed {
						t.Errorf("call %d: denied on a key of 40 calls: %+v", i, r[1])
					}
				})
			}
			wg.Wait()
			if v, _ := c.Get(context.Background(), "k").Int(); ok.Load() != 100 || v != 400 {
				t.Fatalf("allowed %d and counted %d; want 100 and 400", ok.Load(), v)
			}
			for i := range 10 {
				if v, _ := c.Get(context.Background(), fmt.Sprint("o", i)).Int(); v != 40 {
					t.Errorf("o%d counted %d, want 40", i, v)
				}
			}
			if most := runs.most.Load(); batch > 0 && most < 2 {
				t.Errorf("no script run counted more than one call (most %d)", most)
			}
		})
	}
}

// callCounter is a hook that records the most calls of compat.lua one
// command ran.
type callCounter struct{ most atomic.Int64 }

func (h *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.saw(cmd)
		return next(ctx, cmd)
	}
}

func (h *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.saw(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *callCounter) saw(cmd redis.Cmder) {
	n := int64(pipebatch.MergedCalls(cmd, compat.Source))
	for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
	}
}

// TestWindow: a counter expires at its calendar window's end, by Redis's
// clock; its results say how long is left; foreign values start afresh.
func TestWindow(t *testing.T) {
	s, c, _ := newStore(t, 0)
	ctx := context.Background()
	start := time.Now()
	r, err := s.AllowAllN(ctx, []core.Check{{Key: "w", Limit: perMinute(3)}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	now, _ := c.Time(ctx).Result()
	left := now.Truncate(time.Minute).Add(time.Minute).Sub(now)
	if !r[0].Allowed || r[0].Remaining != 1 || r[0].ResetAfter > time.Minute || r[0].ResetAfter < left-time.Second {
		t.Fatalf("first call: %+v (window ends in %v)", r[0], left)
	}
	pttl, _ := c.PTTL(ctx, "w").Result()
	// the TTL read later is shorter by the time since the script ran, at
	// most what passed here since the call began (a loaded machine may
	// take long), and never longer than the result said
	elapsed := time.Since(start)
	if d := pttl - r[0].ResetAfter; d < -elapsed-5*time.Millisecond || d > 5*time.Millisecond {
		t.Fatalf("key expires in %v, result says %v (%v passed since the call)", pttl, r[0].ResetAfter, elapsed)
	}
	r, _ = s.AllowAllN(ctx, []core.Check{{Key: "w", Limit: perMinute(3)}}, 5)
	if r[0].Allowed || r[0].RetryAfter != -1 {
		t.Fatalf("5 units of 3: %+v, want denied, never allowable", r[0])
	}
	if v, _ := c.Get(ctx, "w").Int(); v != 7 {
		t.Fatalf("counted %d, want 7: every hit counts", v)
	}
	for _, foreign := range []func(){
		func() { c.Set(ctx, "w", "1796139016844986:600000", time.Minute) },
		func() { c.Set(ctx, "w", "5", 0) },           // no expiry
		func() { c.Set(ctx, "w", "5", 2*time.Hour) }, // a longer window's
		func() { c.Del(ctx, "w"); c.HSet(ctx, "w", "a", 1) },
	} {
		foreign()
		r, err := s.AllowAllN(ctx, []core.Check{{Key: "w", Limit: perMinute(3)}}, 1)
		if err != nil || !r[0].Allowed || r[0].Remaining != 2 {
			t.Fatalf("over a foreign value: %+v %v", r, err)
		}
	}
}

// TestStop counts as STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: when one key
// would go over, only the keys that would go over are counted.
func TestStop(t *testing.T) {
	s, c, _ := newStore(t, 0)
	ctx := context.Background()
	checks := []core.Check{{Key: "a", Limit: perMinute(2)}, {Key: "b", Limit: perMinute(10)}}
	call := func(ha, hb int64) {
		t.Helper()
		if _, err := s.AllowAllN(compat.With(ctx, &compat.Call{Stop: true, Hits: []int64{ha, hb}}), checks, 1); err != nil {
			t.Fatal(err)
		}
	}
	call(1, 1)
	call(1, 1)
	call(1, 1) // a would go over: only a counts
	call(0, 4) // a is over already, so b does not count
	a, _ := c.Get(ctx, "a").Int()
	b, _ := c.Get(ctx, "b").Int()
	if a != 3 || b != 2 {
		t.Fatalf("a %d, b %d; want 3 and 2", a, b)
	}
	c.Del(ctx, "a")
	call(1, 4) // nothing would go over: both count
	a, _ = c.Get(ctx, "a").Int()
	b, _ = c.Get(ctx, "b").Int()
	if a != 1 || b != 6 {
		t.Fatalf("a %d, b %d; want 1 and 6", a, b)
	}
}

// TestQuota: peek reads, refund gives back, reset clears.
func TestQuota(t *testing.T) {
	s, _, _ := newStore(t, 0)
	ctx := context.Background()
	ch := []core.Check{{Key: "q", Limit: perMinute(5)}}
	s.AllowAllN(ctx, ch, 3)
	if r, _ := s.PeekAll(ctx, ch); r[0].Remaining != 2 {
		t.Fatalf("peek: %+v", r[0])
	}
	if r, _ := s.RefundAllN(ctx, ch, 1); r[0].Remaining != 3 {
		t.Fatalf("refund: %+v", r[0])
	}
	if err := s.Reset(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.PeekAll(ctx, ch); r[0].Remaining != 5 {
		t.Fatalf("after reset: %+v", r[0])
	}
}

// TestScriptFlushed: batched calls answer after Redis forgot the script.
func TestScriptFlushed(t *testing.T) {
	s, c, _ := newStore(t, 2)
	ctx := context.Background()
	for round := range 3 {
		c.ScriptFlush(ctx)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range 64 {
			wg.Go(func() {
				if _, err := s.AllowAllN(ctx, []core.Check{{Key: fmt.Sprint("f", i%8), Limit: perMinute(1000)}}, 1); err != nil {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		if failed.Load() != 0 {
			t.Fatalf("round %d: %d calls failed", round, failed.Load())
		}
	}
}

// TestDeadline: a call to a stopped Redis returns by its deadline.
func TestDeadline(t *testing.T) {
	s, _, rs := newStore(t, 4)
	rs.Pause(t)
	defer rs.Resume(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			t0 := time.Now()
			_, err := s.AllowAllN(ctx, []core.Check{{Key: "p", Limit: perMinute(10)}}, 1)
			if err == nil {
				t.Error("a paused Redis answered")
			}
			if d := time.Since(t0); d > 2*time.Second {
				t.Errorf("returned after %v", d)
			}
		})
	}
	wg.Wait()
}

// TestResetReachesWatchers: a Reset through one replica's store is heard by
// another replica's watch (redisstore's, over the same Redis), so its
// Limiter forgets a denial it remembers of the key; overrides are refused.
func TestResetReachesWatchers(t *testing.T) {
	s, _, rs := newStore(t, 0)
	other := rs.Client(t)
	ns, err := redisstore.New(other)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	watching, err := compat.New(other, compat.Options{Watch: ns.WatchResets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watching.Close() })
	heard := make(chan string, 1)
	stop, err := watching.WatchResets(func(key string) { heard <- key })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// the subscription is made in the background: reset until it hears
	deadline := time.After(5 * time.Second)
	for got := ""; got != "q"; {
		if err := s.Reset(context.Background(), "q"); err != nil {
			t.Fatal(err)
		}
		select {
		case got = <-heard:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("the other replica never heard of the reset")
		}
	}
	if _, err := s.WatchResets(func(string) {}); !errors.Is(err, core.ErrNotSupported) {
		t.Errorf("WatchResets without a watch: %v, want ErrNotSupported", err)
	}
	if err := s.SetOverride(context.Background(), "q", "q:override", perMinute(1), 0); !errors.Is(err, core.ErrNotSupported) {
		t.Errorf("SetOverride: %v, want ErrNotSupported", err)
	}
}
