package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
)

// TestConformanceTwins drives a memorystore.Store and a redisstore.Store over
// miniredis, on one clock, through the same random sequence of calls
// (decisions, peeks, refunds and charges, with and without bounds on the spend they
// give back, some on keys whose limit changes from call
// to call, some naming override keys that are set, cleared and expire
// between calls) and requires identical results: the memorystore.Store computes what
// the scripts compute.
func TestConformanceTwins(t *testing.T) {
	// whole ms (see advance below)
	clock := testkit.NewClock(testkit.Start.Truncate(time.Millisecond))
	c, advance := testkit.FakeRedis(t, clock)
	mem, mini := memoryStores(clock)(t).(core.QuotaStore), redisStores(c)(t).(core.QuotaStore)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	limits := []core.Limit{
		core.PerSecond(3), core.PerSecond(7).WithBurst(2), core.PerMinute(100).WithBurst(150),
		{Rate: 5, Period: 1500 * time.Millisecond, Burst: 5},
	}
	var all []core.Limit
	for _, l := range limits {
		for _, alg := range testkit.Algorithms {
			all = append(all, l.WithAlgorithm(alg))
		}
	}
	ids := []string{"ip:192.0.2.1", "ip:192.0.2.2", "user:42"}
	overridden, charges, clamped := 0, 0, 0
	for step := range 8000 {
		if rng.IntN(3) == 0 {
			// whole ms: a fixed window counts the time left in whole ms
			// of the server's clock (PTTL), which miniredis rounds down
			// where Redis and the memorystore.Store count whole ms of the clock
			advance(time.Duration(rng.Int64N(400)) * time.Millisecond)
		}
		id := ids[rng.IntN(len(ids))]
		n := 1 + rng.IntN(3)
		var checks []core.Check
		for i := range 1 + rng.IntN(2) {
			l := all[rng.IntN(len(all))]
			key := fmt.Sprintf("tw:r%d-%v:{%s}", i, l, id)
			if rng.IntN(3) == 0 {
				// a key whose limit changes from call to call: rate, period,
				// burst or algorithm, as a live reconfiguration changes them
				key = fmt.Sprintf("tw:live%d:{%s}", i, id)
			}
			c := core.Check{Key: key, Limit: l}
			if rng.IntN(3) == 0 {
				c.Override = key + ":override"
			}
			checks = append(checks, c)
		}
		if len(checks) == 2 && checks[0].Key == checks[1].Key {
			checks = checks[:1]
		}
		if rng.IntN(8) == 0 {
			twinOverride(t, rng, checks[0].Key, all, mem, mini)
		}
		var want, got []core.Result
		var err1, err2 error
		var wantC, gotC []core.ChargeResult
		switch rng.IntN(10) {
		case 9:
			// a charge whatever the keys hold, now and then past the bound
			m := 1 + rng.IntN(40)
			if rng.IntN(20) == 0 {
				m = 1 << (30 + rng.IntN(30))
			}
			wantC, err1 = mem.(core.ChargeStore).ChargeAllN(ctx, checks, m)
			gotC, err2 = mini.(core.ChargeStore).ChargeAllN(ctx, checks, m)
			charges++
			for i := range wantC {
				want, got = append(want, wantC[i].Result), append(got, gotC[i].Result)
				if wantC[i].Charged != gotC[i].Charged {
					t.Fatalf("step %d, %v charge of %d: miniredis took %d, memory %d", step, checks[i].Limit, m, gotC[i].Charged, wantC[i].Charged)
				}
				if wantC[i].Charged < m {
					clamped++
				}
			}
		case 0:
			want, err1 = mem.PeekAll(ctx, checks)
			got, err2 = mini.PeekAll(ctx, checks)
		case 1:
			// a refund's bound, as a Limiter ages the ResetAfter of a
			// decision: none, one past, or one within a few periods
			for i := range checks {
				switch rng.IntN(4) {
				case 0:
				case 1:
					checks[i].ResetAfter = -time.Duration(1+rng.Int64N(1000)) * time.Microsecond
				default:
					checks[i].ResetAfter = time.Duration(rng.Int64N(int64(3*checks[i].Limit.Period)/1000)) * time.Microsecond
				}
			}
			want, err1 = mem.RefundAllN(ctx, checks, n)
			got, err2 = mini.RefundAllN(ctx, checks, n)
		default:
			want, err1 = mem.AllowAllN(ctx, checks, n)
			got, err2 = mini.AllowAllN(ctx, checks, n)
		}
		if err1 != nil || err2 != nil {
			t.Fatalf("step %d: errors %v / %v", step, err1, err2)
		}
		if os.Getenv("TWDEBUG") != "" {
			for i := range want {
				fmt.Println(step, clock.Now().UnixMicro(), checks[i].Key, checks[i].Limit, n, want[i].Allowed, want[i].Remaining, got[i].Remaining)
			}
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d, %v n=%d: miniredis %+v, memory %+v", step, checks[i].Limit, n, got[i], want[i])
			}
			if want[i].Limit != checks[i].Limit {
				overridden++
			}
		}
	}
	if charges < 500 || clamped < 100 {
		t.Fatalf("fixture: only %d charges, %d of them clamped", charges, clamped)
	}
	if overridden < 200 {
		t.Fatalf("fixture: only %d results under an override", overridden)
	}
}

// twinOverride sets, or now and then clears, the override of key in both
// stores alike: a limit of all or one a sliding log cannot take, with or
// without a TTL.
func twinOverride(t *testing.T, rng *rand.Rand, key string, all []core.Limit, stores ...core.QuotaStore) {
	t.Helper()
	clear := rng.IntN(4) == 0
	l := all[rng.IntN(len(all))]
	if rng.IntN(6) == 0 {
		l = core.PerSecond(core.MaxLogRate + 1)
	}
	ttl := []time.Duration{0, 300 * time.Millisecond, 1500 * time.Millisecond}[rng.IntN(3)]
	for _, o := range stores {
		var err error
		if clear {
			err = o.ClearOverride(context.Background(), key, key+":override")
		} else {
			err = o.SetOverride(context.Background(), key, key+":override", l, ttl)
		}
		if err != nil {
			t.Fatalf("%T: override of %s: %v", o, key, err)
		}
	}
}

// TestConformanceSlidingLogMembers checks that units a sliding log admits
// in one instant stay distinct members of its sorted set: a log that
// collapsed them would admit more than its rate.
func TestConformanceSlidingLogMembers(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	mini, _ := testkit.FakeRedis(t, clock)
	server := redistest.StartServer(t).Client(t)
	for name, c := range map[string]*redis.Client{"miniredis": mini, "redis-server": server} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := redisStores(c)(t)
			limit := core.PerHour(10).WithAlgorithm(core.SlidingWindowLog)
			key := testkit.UniqueKey(t, "instant")
			for _, n := range []int{4, 6} {
				if res, err := s.AllowAllN(ctx, []core.Check{{Key: key, Limit: limit}}, n); err != nil || !res[0].Allowed {
					t.Fatalf("cost %d: %+v, %v", n, res, err)
				}
			}
			if got, err := c.ZCard(ctx, key).Result(); err != nil || got != 10 {
				t.Fatalf("ZCARD = %d, %v; want 10 distinct members", got, err)
			}
			if res, err := s.AllowAllN(ctx, []core.Check{{Key: key, Limit: limit}}, 1); err != nil || res[0].Allowed {
				t.Fatalf("11th unit: %+v, %v", res, err)
			}
		})
	}
}

// TestRefundWithinOnRedisServer runs the refunds with bounds of the
// sliding log and the sliding counter on a real redis-server's clock, as
// a Limiter ages a decision's ResetAfter: the log loses the member of the
// spend refunded, and the members left at the newest microsecond are
// renamed within the set's size, each key keeping an expiry; the counter
// gives back to the window of the spend, not the current one.
func TestRefundWithinOnRedisServer(t *testing.T) {
	c := redistest.StartServer(t).Client(t)
	ctx := context.Background()
	s := redisStores(c)(t).(core.QuotaStore)
	allow := func(key string, l core.Limit, n int) (core.Result, time.Time) {
		t.Helper()
		at := time.Now()
		res, err := s.AllowAllN(ctx, []core.Check{{Key: key, Limit: l}}, n)
		if err != nil || !res[0].Allowed {
			t.Fatalf("%s: cost %d: %+v, %v", key, n, res, err)
		}
		return res[0], at
	}
	refund := func(key string, l core.Limit, n int, r core.Result, at time.Time) core.Result {
		t.Helper()
		res, err := s.RefundAllN(ctx, []core.Check{{Key: key, Limit: l, ResetAfter: r.ResetAfter - time.Since(at)}}, n)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}

	t.Run("sliding-log", func(t *testing.T) {
		l := core.PerMinute(10).WithAlgorithm(core.SlidingWindowLog)
		key := testkit.UniqueKey(t, "log")
		first, at := allow(key, l, 1)
		// the refund names its spend by the instant nearest its bound,
		// which is off by the difference of two calls' latencies: a
		// second apart, the two spends stay told apart however loaded
		// the machine (2 ms apart, one run on a loaded machine refunded
		// the later one)
		time.Sleep(time.Second)
		allow(key, l, 2)
		if r := refund(key, l, 1, first, at); r.Remaining != 8 {
			t.Fatalf("after the refund of the first unit: %+v, want 8 remaining", r)
		}
		members, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil || len(members) != 2 {
			t.Fatalf("ZRANGE = %v, %v; want the 2 later members", members, err)
		}
		for i, m := range members {
			want := fmt.Sprintf("%d-%05d", int64(m.Score), i+1)
			if m.Member != want || m.Score != members[0].Score {
				t.Errorf("member %d: %v (score %v), want %s: the later call's, renamed within the set's size", i, m.Member, m.Score, want)
			}
		}
		if ttl, err := c.PTTL(ctx, key).Result(); err != nil || ttl <= 0 {
			t.Errorf("PTTL after the rename = %v, %v; want the key's expiry kept", ttl, err)
		}
	})

	t.Run("sliding-counter", func(t *testing.T) {
		l := core.PerSecond(10).WithAlgorithm(core.SlidingWindowCounter)
		for attempt := 0; ; attempt++ {
			if attempt == 5 {
				t.Fatal("five attempts missed their window edges: the machine is too slow to tell")
			}
			key := testkit.UniqueKey(t, "counter")
			now, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			edge := now.Truncate(time.Second).Add(time.Second)
			if edge.Sub(now) < 150*time.Millisecond {
				edge = edge.Add(time.Second)
			}
			time.Sleep(edge.Sub(now) - 100*time.Millisecond)
			first, at := allow(key, l, 5)
			time.Sleep(time.Until(at.Add(150 * time.Millisecond)))
			allow(key, l, 5)
			refund(key, l, 5, first, at)
			v, err := c.HMGet(ctx, key, "sc", "sp").Result()
			if err != nil {
				t.Fatal(err)
			}
			if first.ResetAfter < time.Second || first.ResetAfter > 1150*time.Millisecond || v[0] != "5" && v[1] != "0" {
				continue // the spends did not straddle one edge
			}
			if v[0] != "5" || v[1] != "0" {
				t.Errorf("after the refund of the previous window's 5: sc %v, sp %v; want 5 and 0", v[0], v[1])
			}
			return
		}
	})
}
