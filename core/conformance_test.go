package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
)

// target is one store under the conformance suite.
type target struct {
	name  string
	store core.Store
	// advance moves the store's clock forward; nil when the clock is a real
	// server's and cannot be moved.
	advance func(d time.Duration)
	// client reads keys back; nil for MemoryStore.
	client redis.UniversalClient
}

// fakeClock is a settable clock shared by a MemoryStore and a miniredis.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// start is an arbitrary instant inside a minute, well clear of any window
// edge for the periods the suite uses.
var start = time.Date(2026, 3, 14, 15, 9, 26, 535_897_000, time.UTC)

func memoryTarget(t *testing.T) target {
	clock := &fakeClock{now: start}
	s := core.NewMemoryStore(core.WithClock(clock.Now))
	t.Cleanup(func() { s.Close() })
	return target{name: "memory", store: s, advance: clock.Add}
}

func miniredisTarget(t *testing.T) target {
	m := miniredis.RunT(t)
	now := start
	m.SetTime(now)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return target{name: "miniredis", store: core.NewRedisStore(c), client: c, advance: func(d time.Duration) {
		now = now.Add(d)
		m.SetTime(now)
		m.FastForward(d)
	}}
}

// batched returns a store over c that coalesces calls into pipelines.
func batched(t *testing.T, c redis.Scripter) core.Store {
	s := core.NewRedisStore(c, core.WithBatching(0, 0, 0))
	t.Cleanup(func() { s.Close() })
	return s
}

func redisTargets(t *testing.T) []target {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	return []target{
		{name: "redis-server", store: core.NewRedisStore(c), client: c},
		{name: "redis-server-batched", store: batched(t, c), client: c},
	}
}

func clusterTargets(t *testing.T) []target {
	cl := redistest.StartCluster(t, 3)
	c := cl.Client(t)
	return []target{
		{name: "cluster", store: core.NewRedisStore(c), client: c},
		{name: "cluster-batched", store: batched(t, c), client: c},
	}
}

// forEachTarget runs fn against every store kind, each started afresh.
func forEachTarget(t *testing.T, fn func(t *testing.T, tg target)) {
	var targets []target
	targets = append(targets, memoryTarget(t), miniredisTarget(t))
	targets = append(targets, redisTargets(t)...)
	targets = append(targets, clusterTargets(t)...)
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) { fn(t, tg) })
	}
}

var algorithms = []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter}

// uniqueKey returns a fresh key for one identity under rule.
func uniqueKey(t *testing.T, rule string) string {
	k, err := core.Key("rk:", rule, fmt.Sprintf("ip:%s-%d", t.Name(), rand.Uint64()))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// checkTTLs asserts that every key that exists has an expiry.
func checkTTLs(t *testing.T, tg target, keys ...string) {
	t.Helper()
	if tg.client == nil {
		return
	}
	for _, k := range keys {
		ttl, err := tg.client.PTTL(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("PTTL %s: %v", k, err)
		}
		if ttl == -1 {
			t.Fatalf("key %s has no expiry", k)
		}
	}
}

func TestConformanceBurstThenDeny(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		for _, alg := range algorithms {
			t.Run(alg.String(), func(t *testing.T) {
				limit := core.PerHour(5).WithAlgorithm(alg)
				key := uniqueKey(t, "burst")
				for i := range 5 {
					r, err := tg.store.AllowN(ctx, key, limit, 1)
					if err != nil {
						t.Fatal(err)
					}
					if !r.Allowed || r.Remaining != 4-i || r.RetryAfter != 0 || r.ResetAfter <= 0 || r.ResetAfter > 2*time.Hour {
						t.Fatalf("call %d: got %+v, want allowed with %d remaining", i+1, r, 4-i)
					}
					if r.Limit != limit {
						t.Fatalf("call %d: Limit = %v, want %v", i+1, r.Limit, limit)
					}
					checkTTLs(t, tg, key)
				}
				for i := range 3 {
					r, err := tg.store.AllowN(ctx, key, limit, 1)
					if err != nil {
						t.Fatal(err)
					}
					if r.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 || r.RetryAfter > 2*time.Hour || r.Never() {
						t.Fatalf("denied call %d: got %+v", i+1, r)
					}
					checkTTLs(t, tg, key)
				}
				// a cost above capacity can never pass, and says so
				r, err := tg.store.AllowN(ctx, key, limit, 6)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed || !r.Never() || r.RetryAfter != -1 {
					t.Fatalf("cost 6 of 5: got %+v, want never", r)
				}
			})
		}
	})
}

func TestConformanceCost(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		for _, alg := range algorithms {
			t.Run(alg.String(), func(t *testing.T) {
				limit := core.PerHour(10).WithAlgorithm(alg)
				key := uniqueKey(t, "cost")
				steps := []struct {
					n       int
					allowed bool
					remain  int
				}{
					{3, true, 7},
					{11, false, 7}, // above capacity: never, nothing spent
					{6, true, 1},
					{2, false, 1}, // denied, nothing spent
					{1, true, 0},
				}
				for i, s := range steps {
					r, err := tg.store.AllowN(ctx, key, limit, s.n)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := r.Allowed, s.allowed; got != want {
						t.Fatalf("step %d (n=%d): Allowed = %v, want %v (%+v)", i, s.n, got, want, r)
					}
					if got, want := r.Remaining, s.remain; got != want {
						t.Fatalf("step %d (n=%d): Remaining = %d, want %d (%+v)", i, s.n, got, want, r)
					}
					checkTTLs(t, tg, key)
				}
			})
		}
	})
}

func TestConformanceAllOrNothing(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		for _, alg := range algorithms {
			// the tight limit uses alg; the loose one cycles through another
			// algorithm, so mixed algorithms are covered too
			loose := core.PerHour(10).WithAlgorithm(algorithms[(int(alg)+1)%len(algorithms)])
			tight := core.PerMinute(3).WithAlgorithm(alg)
			t.Run(alg.String(), func(t *testing.T) {
				id := fmt.Sprintf("user:%d", rand.Uint64())
				kLoose, _ := core.Key("rk:", "hourly", id)
				kTight, _ := core.Key("rk:", "minutely", id)
				checks := []core.Check{{Key: kLoose, Limit: loose}, {Key: kTight, Limit: tight}}
				for i := range 3 {
					res, err := tg.store.AllowAllN(ctx, checks, 1)
					if err != nil {
						t.Fatal(err)
					}
					if !res[0].Allowed || !res[1].Allowed || res[0].Remaining != 9-i || res[1].Remaining != 2-i {
						t.Fatalf("call %d: got %+v", i+1, res)
					}
				}
				for range 3 {
					res, err := tg.store.AllowAllN(ctx, checks, 1)
					if err != nil {
						t.Fatal(err)
					}
					if res[0].Allowed || res[1].Allowed {
						t.Fatalf("want both denied, got %+v", res)
					}
					// the loose limit had room: nothing was taken from it
					if got, want := res[0].Remaining, 7; got != want {
						t.Fatalf("loose Remaining = %d, want %d (denied calls must consume nothing)", got, want)
					}
					if res[0].RetryAfter != 0 || res[1].RetryAfter <= 0 {
						t.Fatalf("RetryAfter: loose %v (want 0), tight %v (want > 0)", res[0].RetryAfter, res[1].RetryAfter)
					}
					checkTTLs(t, tg, kLoose, kTight)
				}
				// the loose limit alone still has exactly 7
				r, err := tg.store.AllowN(ctx, kLoose, loose, 7)
				if err != nil || !r.Allowed || r.Remaining != 0 {
					t.Fatalf("loose limit after denials: %+v, %v", r, err)
				}
			})
		}
	})
}

// TestConformanceSameInstant checks that units admitted in one instant stay
// distinct: a sliding log that collapsed them would admit more than its rate.
func TestConformanceSameInstant(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		limit := core.PerHour(10).WithAlgorithm(core.SlidingWindowLog)
		key := uniqueKey(t, "instant")
		r, err := tg.store.AllowN(ctx, key, limit, 4)
		if err != nil || !r.Allowed || r.Remaining != 6 {
			t.Fatalf("AllowN 4: %+v, %v", r, err)
		}
		r, err = tg.store.AllowN(ctx, key, limit, 6)
		if err != nil || !r.Allowed || r.Remaining != 0 {
			t.Fatalf("AllowN 6: %+v, %v", r, err)
		}
		if tg.client != nil {
			if got, err := tg.client.ZCard(ctx, key).Result(); err != nil || got != 10 {
				t.Fatalf("ZCARD = %d, %v; want 10 distinct members", got, err)
			}
		}
		if r, _ := tg.store.AllowN(ctx, key, limit, 1); r.Allowed {
			t.Fatalf("11th unit allowed: %+v", r)
		}
	})
}

// TestConformanceTime steps the clock of the stores whose clock can be set
// and checks when each algorithm lets units through again.
func TestConformanceTime(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		if tg.advance == nil {
			t.Skip("the clock of a real server cannot be set")
		}
		ctx := context.Background()
		for _, alg := range algorithms {
			t.Run(alg.String(), func(t *testing.T) {
				limit := core.PerMinute(6).WithAlgorithm(alg)
				key := uniqueKey(t, "time")
				for range 6 {
					if r, err := tg.store.AllowN(ctx, key, limit, 1); err != nil || !r.Allowed {
						t.Fatalf("burst: %+v, %v", r, err)
					}
				}
				r, err := tg.store.AllowN(ctx, key, limit, 1)
				if err != nil || r.Allowed {
					t.Fatalf("7th: %+v, %v", r, err)
				}
				wait := r.RetryAfter
				if wait <= time.Microsecond {
					t.Fatalf("RetryAfter = %v", wait)
				}
				// one microsecond early is still too early; on time passes
				tg.advance(wait - time.Microsecond)
				if r, _ := tg.store.AllowN(ctx, key, limit, 1); r.Allowed {
					t.Fatalf("allowed 1µs before RetryAfter: %+v", r)
				}
				tg.advance(time.Microsecond)
				if r, _ := tg.store.AllowN(ctx, key, limit, 1); !r.Allowed {
					t.Fatalf("denied at RetryAfter %v: %+v", wait, r)
				}
				// after two quiet periods every algorithm is full again
				tg.advance(2 * time.Minute)
				r, err = tg.store.AllowN(ctx, key, limit, 6)
				if err != nil || !r.Allowed || r.Remaining != 0 {
					t.Fatalf("after two periods: %+v, %v", r, err)
				}
			})
		}
	})
}

// TestTwins drives a MemoryStore and miniredis, on one clock, through the
// same random sequence of calls and requires identical results.
func TestTwins(t *testing.T) {
	mem, mini := memoryTarget(t), miniredisTarget(t)
	advance := func(d time.Duration) { mem.advance(d); mini.advance(d) }
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	limits := []core.Limit{
		core.PerSecond(3), core.PerSecond(7).WithBurst(2), core.PerMinute(100).WithBurst(150),
		{Rate: 5, Period: 1500 * time.Millisecond, Burst: 5},
	}
	var all []core.Limit
	for _, l := range limits {
		for _, alg := range algorithms {
			all = append(all, l.WithAlgorithm(alg))
		}
	}
	ids := []string{"ip:192.0.2.1", "ip:192.0.2.2", "user:42"}
	for step := range 8000 {
		if rng.IntN(3) == 0 {
			advance(time.Duration(rng.Int64N(int64(400 * time.Millisecond))))
		}
		id := ids[rng.IntN(len(ids))]
		n := 1 + rng.IntN(3)
		var checks []core.Check
		for i := range 1 + rng.IntN(2) {
			l := all[rng.IntN(len(all))]
			k, _ := core.Key("tw:", fmt.Sprintf("r%d-%v", i, l), id)
			checks = append(checks, core.Check{Key: k, Limit: l})
		}
		if len(checks) == 2 && checks[0].Key == checks[1].Key {
			checks = checks[:1]
		}
		want, err1 := mem.store.AllowAllN(ctx, checks, n)
		got, err2 := mini.store.AllowAllN(ctx, checks, n)
		if err1 != nil || err2 != nil {
			t.Fatalf("step %d: errors %v / %v", step, err1, err2)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d, %v n=%d: miniredis %+v, memory %+v", step, checks[i].Limit, n, got[i], want[i])
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		key := uniqueKey(t, "bad")
		cases := []struct {
			name  string
			key   string
			limit core.Limit
			n     int
			want  error
		}{
			{"zero rate", key, core.PerSecond(0), 1, core.ErrInvalidLimit},
			{"negative rate", key, core.PerSecond(-3), 1, core.ErrInvalidLimit},
			{"zero period", key, core.Limit{Rate: 1, Burst: 1}, 1, core.ErrInvalidLimit},
			{"negative period", key, core.Limit{Rate: 1, Period: -time.Second, Burst: 1}, 1, core.ErrInvalidLimit},
			{"zero burst", key, core.PerSecond(5).WithBurst(0), 1, core.ErrInvalidLimit},
			{"sub-ms period", key, core.Limit{Rate: 1, Period: 1500 * time.Microsecond, Burst: 1}, 1, core.ErrInvalidLimit},
			{"unknown algorithm", key, core.PerSecond(1).WithAlgorithm(9), 1, core.ErrInvalidLimit},
			{"zero cost", key, core.PerSecond(1), 0, core.ErrInvalidCost},
			{"negative cost", key, core.PerSecond(1), -1, core.ErrInvalidCost},
			{"empty key", "", core.PerSecond(1), 1, core.ErrInvalidIdentity},
		}
		for _, c := range cases {
			_, err := tg.store.AllowN(ctx, c.key, c.limit, c.n)
			if !errors.Is(err, c.want) {
				t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			}
		}
		if _, err := tg.store.AllowAllN(ctx, nil, 1); err == nil {
			t.Error("AllowAllN with no checks: want error")
		}
	})
}

// TestConformanceLimitLowered spends a key under one limit, then asks under
// a lower one, as after a configuration change while keys are live: the
// store denies with nothing remaining, never fails, and allows again once
// the key has recovered under the new limit.
func TestConformanceLimitLowered(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		ctx := context.Background()
		for _, alg := range algorithms {
			t.Run(alg.String(), func(t *testing.T) {
				high := core.PerHour(100).WithAlgorithm(alg)
				low := core.PerHour(10).WithAlgorithm(alg)
				if alg == core.GCRA {
					high = high.WithBurst(100)
					low = core.PerHour(10).WithAlgorithm(alg).WithBurst(2)
				}
				key := uniqueKey(t, "lowered")
				for i := range 50 {
					if r, err := tg.store.AllowN(ctx, key, high, 1); err != nil || !r.Allowed {
						t.Fatalf("call %d under %v: %+v, %v", i, high, r, err)
					}
				}
				for _, n := range []int{1, 2} {
					r, err := tg.store.AllowN(ctx, key, low, n)
					if err != nil {
						t.Fatalf("cost %d under %v after spending 50 under %v: %v", n, low, high, err)
					}
					if r.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 || r.Never() || r.Limit != low {
						t.Fatalf("cost %d under %v: %+v, want a denial with nothing remaining", n, low, r)
					}
					checkTTLs(t, tg, key)
				}
			})
		}
	})
}
