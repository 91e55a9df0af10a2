package core_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/memorystore"
)

// refundStores are the ways a decision's units are spent, each with the
// clock its limiter runs on (nil: a real redis-server's): a real
// redis-server, an in-process memorystore.Store, and the Limiter's own
// fallback under FailLocal, while its store is down.
func refundStores(t *testing.T) []refundStore {
	t.Helper()
	rdb := redistest.StartServer(t).Client(t, recommended)
	memClock := testkit.NewClock(testkit.Start)
	mem := testkit.MustMemory(memorystore.WithClock(memClock.Now))
	t.Cleanup(func() { mem.Close() })
	fbClock := testkit.NewClock(testkit.Start)
	return []refundStore{
		// a generous deadline: on a loaded machine a call past the default
		// 50ms would be decided by the fallback, not by the redis-server
		// under test
		{"redis-server", newLimiter(t, testkit.MustRedis(rdb), core.WithTimeout(time.Minute)), nil, rdb},
		{"memorystore", newLimiter(t, mem), memClock, nil},
		{"fallback", newLimiter(t, downStore{}, core.WithClock(fbClock.Now)), fbClock, nil},
	}
}

// refundStore is a Limiter whose decisions spend in one way.
type refundStore struct {
	name  string
	l     *core.Limiter
	clock *testkit.Clock // nil for a redis-server's clock
	rdb   *redis.Client  // the redis-server's, when clock is nil
}

// TestRefundOnce spends 3 of 3, then refunds the first decision three
// times: one unit comes back, so one more request passes, not three. Eight
// goroutines refunding one decision at once give back one unit too.
func TestRefundOnce(t *testing.T) {
	for _, s := range refundStores(t) {
		t.Run(s.name, func(t *testing.T) {
			for _, concurrent := range []bool{false, true} {
				r := rule("login", core.PerMinute(3), fmt.Sprintf("user:once-%v-%d", concurrent, time.Now().UnixNano()))
				var first core.Decision
				for i := range 3 {
					d, err := check(t, s.l, r)
					if err != nil || !d.Allowed {
						t.Fatalf("request %d of 3: %+v %v", i+1, d, err)
					}
					if i == 0 {
						first = d
					}
				}
				if concurrent {
					var wg sync.WaitGroup
					for range 8 {
						wg.Go(func() {
							if err := s.l.Refund(context.Background(), first); err != nil {
								t.Error(err)
							}
						})
					}
					wg.Wait()
				} else {
					for range 3 {
						if err := s.l.Refund(context.Background(), first); err != nil {
							t.Fatal(err)
						}
					}
				}
				admitted := 0
				for range 4 {
					if d, err := check(t, s.l, r); err != nil {
						t.Fatal(err)
					} else if d.Allowed {
						admitted++
					}
				}
				how := "three times"
				if concurrent {
					how = "by 8 goroutines at once"
				}
				if admitted != 1 {
					t.Errorf("3 of 3 spent, the first decision refunded %s: %d more admitted, want 1", how, admitted)
				}
			}
		})
	}
}

// TestFixedWindowRefundGoesToItsWindow spends a unit 100 ms before a fixed
// window's edge, three after it (a fresh window, limit 3), then refunds the
// first: it was spent in a window that is over, so nothing comes back, and
// a fourth unit in the new window is denied.
func TestFixedWindowRefundGoesToItsWindow(t *testing.T) {
	const period = time.Second
	limit := core.PerSecond(3).WithAlgorithm(core.FixedWindow)
	for _, s := range refundStores(t) {
		t.Run(s.name, func(t *testing.T) {
			for attempt := 0; ; attempt++ {
				if attempt == 5 {
					t.Fatal("five attempts straddled other window edges than the one under test: the machine is too slow to tell")
				}
				r := rule("login", limit, fmt.Sprintf("user:edge-%d-%d", attempt, time.Now().UnixNano()))
				// 100 ms before an edge of the store's clock
				if s.clock != nil {
					now := s.clock.Now()
					s.clock.Add(now.Truncate(period).Add(2*period - 100*time.Millisecond).Sub(now))
				} else {
					waitBeforeEdge(t, s.rdb, period, 100*time.Millisecond)
				}
				first, err := check(t, s.l, r)
				if err != nil || !first.Allowed {
					t.Fatalf("the unit before the edge: %+v %v", first, err)
				}
				if first.Results[0].ResetAfter > 200*time.Millisecond {
					continue // the edge came sooner than it was read
				}
				if s.clock != nil {
					s.clock.Add(150 * time.Millisecond)
				} else {
					time.Sleep(first.Results[0].ResetAfter + 50*time.Millisecond)
				}
				var failures [3]core.Decision
				for i := range failures {
					failures[i], err = check(t, s.l, r)
					if err != nil || !failures[i].Allowed || failures[i].Results[0].Remaining != 2-i {
						t.Fatalf("failure %d after the edge: %+v %v, want allowed in a fresh window", i+1, failures[i], err)
					}
				}
				if err := s.l.Refund(context.Background(), first); err != nil {
					t.Fatal(err)
				}
				fourth, err := check(t, s.l, r)
				if err != nil {
					t.Fatal(err)
				}
				if fourth.Results[0].ResetAfter > failures[2].Results[0].ResetAfter {
					continue // a stall carried it into the window after
				}
				if fourth.Allowed {
					t.Errorf("a unit spent before the edge, refunded after it: a 4th failure admitted in the new window under limit 3 (%+v)", fourth.Results[0].Result)
				}
				return
			}
		})
	}
}

// waitBeforeEdge sleeps until before ahead of the next edge of a window of
// period by rdb's server's clock, an edge at least before+50ms away.
func waitBeforeEdge(t *testing.T, rdb *redis.Client, period, before time.Duration) {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	edge := now.Truncate(period).Add(period)
	if edge.Sub(now) < before+50*time.Millisecond {
		edge = edge.Add(period)
	}
	time.Sleep(edge.Sub(now) - before)
}

// TestRefundOfAReplicaShare: the fallback decides under this replica's
// share of the limit (WithReplicas), and a refund gives back under that
// share, one unit for one unit.
func TestRefundOfAReplicaShare(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	l := newLimiter(t, downStore{}, core.WithClock(clock.Now), core.WithReplicas(2))
	r := rule("login", core.PerMinute(4), "user:share")
	var first core.Decision
	for i := range 2 {
		d, err := check(t, l, r)
		if err != nil || !d.Allowed || d.Results[0].Limit.Rate != 2 {
			t.Fatalf("unit %d of this replica's 2: %+v %v", i+1, d, err)
		}
		if i == 0 {
			first = d
		}
	}
	if err := l.Refund(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 3 {
		if d, _ := check(t, l, r); d.Allowed {
			admitted++
		}
	}
	if admitted != 1 {
		t.Errorf("one unit refunded of a share of 2: %d more admitted, want 1", admitted)
	}
}
