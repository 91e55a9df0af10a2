package outbound

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/pipebatch"
	"github.com/ratekit/ratekit/internal/redistest"
)

// reserveGate is a hook that holds the reservations sent alone until open
// is closed, and records the most reservations one round trip carried, in
// a pipeline or in a merged script run.
type reserveGate struct {
	open   chan struct{}
	held   atomic.Int64
	most   atomic.Int64
	shared atomic.Int64 // round trips of more than one reservation
}

func isReserve(cmd redis.Cmder) bool {
	a := cmd.Args()
	return len(a) > 1 && cmd.Name() == "evalsha" && a[1] == reserveSHA
}

func (g *reserveGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *reserveGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isReserve(cmd) {
			g.held.Add(1)
			<-g.open
		}
		g.carried(pipebatch.MergedCalls(cmd, reserveScriptSrc))
		return next(ctx, cmd)
	}
}

func (g *reserveGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			n += pipebatch.MergedCalls(c, reserveScriptSrc)
		}
		g.carried(n)
		return next(ctx, cmds)
	}
}

// carried records a round trip of n reservations.
func (g *reserveGate) carried(n int) {
	if n > 1 {
		g.shared.Add(1)
	}
	for m := g.most.Load(); int64(n) > m && !g.most.CompareAndSwap(m, int64(n)); m = g.most.Load() {
	}
}

// TestConcurrentReservationsShareRoundTrips: through a client that can
// pipeline (one redis-server, a 3-master Cluster), the reservations that
// come while every pipeline is out go together in the next ones, and each
// still gets a turn of its own: the burst's at once, then one an interval
// apart.
func TestConcurrentReservationsShareRoundTrips(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		rdb := redistest.StartServer(t).Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
		reservationsShareRoundTrips(t, rdb)
	})
	t.Run("cluster", func(t *testing.T) {
		rdb := redistest.StartCluster(t, 3).Client(t, func(o *redis.ClusterOptions) { o.ContextTimeoutEnabled = true })
		reservationsShareRoundTrips(t, rdb)
	})
}

func reservationsShareRoundTrips(t *testing.T, rdb interface {
	redis.Scripter
	AddHook(redis.Hook)
}) {
	g := &reserveGate{open: make(chan struct{})}
	rdb.AddHook(g)
	const burst, callers = 10, 64
	l := mustNew(t, rdb, Limit{Rate: 1, Period: time.Hour, Burst: burst}, WithMargin(0), WithTimeout(time.Minute))
	if l.batch == nil {
		t.Fatal("no batching")
	}
	start := time.Now()
	wakes := make([]time.Time, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			r, err := l.Reserve(context.Background(), "k")
			if err != nil || r.Degraded() {
				t.Errorf("caller %d: %v", i, err)
				return
			}
			wakes[i] = r.TimeToAct()
		})
	}
	// every pipeline is out, held, and the other callers queue
	for deadline := time.Now().Add(time.Minute); g.held.Load() < pipelines || l.batch.Queued() < callers-pipelines; {
		if time.Now().After(deadline) {
			close(g.open)
			t.Fatalf("a minute on: %d reservations sent alone, %d queued; want %d and %d",
				g.held.Load(), l.batch.Queued(), pipelines, callers-pipelines)
		}
		time.Sleep(time.Millisecond)
	}
	close(g.open)
	wg.Wait()
	if t.Failed() {
		return
	}
	if g.most.Load() < 2 {
		t.Errorf("no round trip carried more than one reservation (%d did)", g.shared.Load())
	}
	slices.SortFunc(wakes, func(a, b time.Time) int { return a.Compare(b) })
	// a minute's slack for the gap between the local clock and Redis's
	// readings, far below the hour between turns
	for i, w := range wakes {
		if i < burst {
			if d := w.Sub(start); d < -time.Minute || d > time.Minute {
				t.Errorf("turn %d of the burst acts %v after the start, want now", i, d)
			}
			continue
		}
		if d := w.Sub(wakes[i-1]); d < time.Hour-time.Minute || d > time.Hour+time.Minute {
			t.Errorf("turn %d acts %v after turn %d, want an hour", i, d, i-1)
		}
	}
}
