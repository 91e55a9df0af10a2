package core_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/memorystore"
)

// countingStore is a decorator, as a user would write one for metrics or
// tracing: it counts calls, notes whether each ran on the goroutine of the
// test that asked, and forwards the inner store's traits when told to.
type countingStore struct {
	inner   core.Store
	forward bool
	test    string // the test function's name, looked for in the call stack
	calls   atomic.Int64
	direct  atomic.Int64 // calls made on the test's own goroutine
}

func (s *countingStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	s.calls.Add(1)
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "."+s.test) {
			s.direct.Add(1)
			break
		}
		if !more {
			break
		}
	}
	return s.inner.AllowAllN(ctx, checks, n)
}

// Traits forwards the inner store's traits, as the Store docs ask of a
// wrapper, unless the test wants a wrapper that does not.
func (s *countingStore) Traits() core.Traits {
	if !s.forward {
		return core.Traits{}
	}
	return testkit.Traits(s.inner)
}

// TestDecoratedStoreKeepsDirectPath: a redisstore.Store over a client that keeps
// deadlines is called on the request's goroutine, also inside a decorator
// that forwards its traits; a decorator that does not forward them gets a
// goroutine per call, as any store that promises nothing.
func TestDecoratedStoreKeepsDirectPath(t *testing.T) {
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	inner := testkit.MustRedis(client)
	if !testkit.Traits(inner).KeepsDeadlines {
		t.Fatal("fixture: the redisstore.Store does not keep deadlines")
	}
	for _, forward := range []bool{true, false} {
		store := &countingStore{inner: inner, forward: forward, test: "TestDecoratedStoreKeepsDirectPath"}
		// a generous deadline: the test counts where calls run, and a loaded
		// machine must not turn one into a missed deadline
		l := newLimiter(t, store, core.WithTimeout(time.Minute))
		for range 10 {
			if d, err := check(t, l, rule("r", core.PerMinute(100), "user:1")); err != nil || !d.Allowed || d.Degraded() {
				t.Fatalf("%+v, %v", d, err)
			}
		}
		want := int64(0)
		if forward {
			want = 10
		}
		if got := store.direct.Load(); store.calls.Load() != 10 || got != want {
			t.Errorf("forwarding %v: %d of %d calls on the request's goroutine, want %d", forward, got, store.calls.Load(), want)
		}
	}
}

// TestLimiterLeases: a leasestore.Store under a Limiter leases a hot key's
// units, so most decisions cost the shared store nothing, and the traits
// of the store it wraps carry through.
func TestLimiterLeases(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	shared := &countingStore{inner: testkit.MustMemory(memorystore.WithClock(clock.Now)), forward: true}
	leasing := testkit.MustLeasing(shared, leasestore.WithClock(clock.Now))
	t.Cleanup(func() { leasing.Close() })
	if !testkit.Traits(leasing).InProcess {
		t.Fatal("the leasing store hides the traits of the store it wraps")
	}
	l := newLimiter(t, leasing, core.WithClock(clock.Now))
	r := rule("hot", core.PerMinute(64_000), "ip:192.0.2.1")
	for i := range 1000 {
		if d, err := check(t, l, r); err != nil || !d.Allowed {
			t.Fatalf("decision %d: %+v, %v", i, d, err)
		}
	}
	if got := shared.calls.Load(); got > 1000/8 {
		t.Errorf("%d calls to the shared store for 1000 decisions, want at most %d", got, 1000/8)
	}
	// two rules of one identity are decided together, never from leases
	before := shared.calls.Load()
	if _, err := check(t, l, r, rule("other", core.PerMinute(64_000), "ip:192.0.2.1")); err != nil {
		t.Fatal(err)
	}
	if shared.calls.Load() != before+1 {
		t.Error("a decision of two rules did not reach the shared store")
	}
}
