package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// fixedPaths are the ways a redisstore.Store decides a fixed window: the one-key
// script (fixed_single.lua), and the generic one (decide.lua over
// fixed.lua: a second check beside it).
var fixedPaths = []struct {
	name string
	// allow decides key under limit at cost n and returns key's result.
	allow func(t *testing.T, s core.Store, key string, limit core.Limit, n int) core.Result
}{
	{"single", func(t *testing.T, s core.Store, key string, limit core.Limit, n int) core.Result {
		return allowFixed(t, s, []core.Check{{Key: key, Limit: limit}}, n)
	}},
	{"decide", func(t *testing.T, s core.Store, key string, limit core.Limit, n int) core.Result {
		// a sibling key of the same identity, under a limit nothing reaches
		return allowFixed(t, s, []core.Check{{Key: key, Limit: limit}, {Key: key + "-sib", Limit: core.PerSecond(1_000_000)}}, n)
	}},
}

func allowFixed(t *testing.T, s core.Store, checks []core.Check, n int) core.Result {
	t.Helper()
	res, err := s.AllowAllN(context.Background(), checks, n)
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// fixedLimit is rate per period in fixed windows.
func fixedLimit(rate int, period time.Duration) core.Limit {
	return core.Limit{Rate: rate, Period: period, Algorithm: core.FixedWindow}
}

// redisMS returns Redis's clock in ms.
func redisMS(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

// TestFixedWindowKeys checks the state a fixed window keeps in Redis on a
// real redis-server: a string counter of the window's units, expiring at
// the window's end by Redis's clock; denied costs are not counted; refunds
// give units back and delete the counter at 0; a peek creates nothing; a
// key of another type, a non-integer, or a count left by a longer period
// counts as absent; an earlier version's hash keeps its count in its
// window.
func TestFixedWindowKeys(t *testing.T) {
	c := redistest.StartServer(t).Client(t)
	ctx := context.Background()
	s := testkit.MustRedis(c, redisstore.WithoutBatching())
	for _, p := range fixedPaths {
		t.Run(p.name, func(t *testing.T) {
			limit := fixedLimit(3, time.Hour)
			pm := limit.Period.Milliseconds()
			t.Run("expiry", func(t *testing.T) {
				key := testkit.UniqueKey(t, "fx")
				before := redisMS(t, c)
				r := p.allow(t, s, key, limit, 1)
				after := redisMS(t, c)
				if !r.Allowed || r.Remaining != 2 {
					t.Fatalf("first unit: %+v", r)
				}
				if v, err := c.Get(ctx, key).Result(); err != nil || v != "1" {
					t.Fatalf("GET = %q, %v; want a counter of 1", v, err)
				}
				at, err := c.PExpireTime(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				end := at.Milliseconds()
				if end%pm != 0 || end <= before || end-pm > after {
					t.Fatalf("expires at %d ms; want the end of the window holding [%d, %d], a multiple of %d", end, before, after, pm)
				}
				// the reply counts the same end, in whole ms of Redis's clock
				// ((PTTL - 1) ms and 1 µs: never past the end)
				if left := r.ResetAfter.Milliseconds() + 1; r.ResetAfter%time.Millisecond != time.Microsecond || left < end-after || left > end-before {
					t.Fatalf("ResetAfter %v; want %d ms less the clock in [%d, %d], less 999µs", r.ResetAfter, end, before, after)
				}
			})
			t.Run("denied", func(t *testing.T) {
				key := testkit.UniqueKey(t, "fx")
				p.allow(t, s, key, limit, 2)
				if r := p.allow(t, s, key, limit, 2); r.Allowed || r.Remaining != 1 || r.RetryAfter <= 0 {
					t.Fatalf("cost 2 with 1 left: %+v", r)
				}
				if r := p.allow(t, s, key, limit, 4); r.Allowed || r.Remaining != 1 || !r.Never() {
					t.Fatalf("cost 4 of 3: %+v", r)
				}
				if v, _ := c.Get(ctx, key).Result(); v != "2" {
					t.Fatalf("GET = %q after denials; want 2, what was allowed", v)
				}
				if r := p.allow(t, s, key, limit, 1); !r.Allowed || r.Remaining != 0 {
					t.Fatalf("the last unit: %+v", r)
				}
				fresh := testkit.UniqueKey(t, "fx")
				if r := p.allow(t, s, fresh, limit, 4); r.Allowed || !r.Never() || r.ResetAfter != 0 {
					t.Fatalf("cost 4 of 3 on a fresh key: %+v", r)
				}
				if n, _ := c.Exists(ctx, fresh).Result(); n != 0 {
					t.Fatal("a denied cost on a fresh key left the key behind")
				}
			})
			t.Run("refund-peek", func(t *testing.T) {
				key := testkit.UniqueKey(t, "fx")
				qs := core.QuotaStore(s)
				if res, err := qs.PeekAll(ctx, []core.Check{{Key: key, Limit: limit}}); err != nil || res[0].Remaining != 3 {
					t.Fatalf("peek of a fresh key: %+v, %v", res, err)
				}
				if n, _ := c.Exists(ctx, key).Result(); n != 0 {
					t.Fatal("a peek created the key")
				}
				p.allow(t, s, key, limit, 3)
				ttl := c.PTTL(ctx, key).Val()
				res, err := qs.RefundAllN(ctx, []core.Check{{Key: key, Limit: limit}}, 2)
				if err != nil || res[0].Remaining != 2 {
					t.Fatalf("refund of 2: %+v, %v", res, err)
				}
				if v, _ := c.Get(ctx, key).Result(); v != "1" || c.PTTL(ctx, key).Val() > ttl {
					t.Fatalf("GET = %q after a refund; want 1, with the window's expiry", v)
				}
				if _, err := qs.RefundAllN(ctx, []core.Check{{Key: key, Limit: limit}}, 5); err != nil {
					t.Fatal(err)
				}
				if n, _ := c.Exists(ctx, key).Result(); n != 0 {
					t.Fatal("a refund to 0 left the counter behind")
				}
			})
			t.Run("foreign", func(t *testing.T) {
				for name, write := range map[string]func(key string) error{
					"zset":       func(k string) error { return c.ZAdd(ctx, k, redis.Z{Score: 1, Member: "a"}).Err() },
					"text":       func(k string) error { return c.Set(ctx, k, "12:34", time.Hour).Err() },
					"no expiry":  func(k string) error { return c.Set(ctx, k, "2", 0).Err() },
					"longer":     func(k string) error { return c.Set(ctx, k, "2", limit.Period+time.Minute).Err() },
					"a bare TAT": func(k string) error { return c.Set(ctx, k, "1764590400000000", time.Minute).Err() },
					"old window": func(k string) error {
						return c.HSet(ctx, k, "w", redisMS(t, c)/pm-1, "c", 3).Err()
					},
				} {
					key := testkit.UniqueKey(t, "fx")
					if err := write(key); err != nil {
						t.Fatal(err)
					}
					if r := p.allow(t, s, key, limit, 1); !r.Allowed || r.Remaining != 2 {
						t.Fatalf("%s: %+v; want a fresh window", name, r)
					}
					if v, _ := c.Get(ctx, key).Result(); v != "1" {
						t.Fatalf("%s: GET = %q; want a counter of 1", name, v)
					}
				}
			})
			t.Run("old hash", func(t *testing.T) {
				key := testkit.UniqueKey(t, "fx")
				if err := c.HSet(ctx, key, "w", redisMS(t, c)/pm, "c", 2).Err(); err != nil {
					t.Fatal(err)
				}
				c.PExpire(ctx, key, limit.Period)
				if r := p.allow(t, s, key, limit, 1); !r.Allowed || r.Remaining != 0 {
					t.Fatalf("a unit on an old hash of 2 in this window: %+v", r)
				}
				if v, _ := c.Get(ctx, key).Result(); v != "3" {
					t.Fatalf("GET = %q; want the hash's count carried into a counter", v)
				}
				if r := p.allow(t, s, key, limit, 1); r.Allowed {
					t.Fatalf("a fourth unit: %+v", r)
				}
			})
		})
	}
}

// TestFixedWindowRollover spends windows of 50 ms on a real redis-server:
// once a denial's RetryAfter has passed, by Redis's clock, a new window
// has the whole rate again.
func TestFixedWindowRollover(t *testing.T) {
	c := redistest.StartServer(t).Client(t)
	s := testkit.MustRedis(c, redisstore.WithoutBatching())
	for _, p := range fixedPaths[:2] {
		t.Run(p.name, func(t *testing.T) {
			limit := fixedLimit(2, 50*time.Millisecond)
			key := testkit.UniqueKey(t, "roll")
			for range 3 {
				if r := p.allow(t, s, key, limit, 2); !r.Allowed {
					// the window may have ended between two calls: the
					// next one then has the rate
					continue
				}
				r := p.allow(t, s, key, limit, 1)
				if r.Allowed {
					continue // a new window began
				}
				if r.RetryAfter <= 0 || r.RetryAfter > limit.Period {
					t.Fatalf("denied: %+v; want a RetryAfter within the window", r)
				}
				for start := redisMS(t, c); redisMS(t, c) <= start+r.RetryAfter.Milliseconds(); {
					time.Sleep(time.Millisecond)
				}
				if r := p.allow(t, s, key, limit, 2); !r.Allowed {
					t.Fatalf("the whole rate after the window's end: %+v", r)
				}
			}
			if ttl := c.PTTL(context.Background(), key).Val(); ttl > limit.Period {
				t.Fatalf("PTTL %v; want at most a window", ttl)
			}
		})
	}
}

// TestFixedWindowBigLimit decides a fixed window whose one-integer reply
// would not fit a Lua number, which runs fixed.lua through single.lua.
func TestFixedWindowBigLimit(t *testing.T) {
	c := redistest.StartServer(t).Client(t)
	s := testkit.MustRedis(c, redisstore.WithoutBatching())
	limit := core.Limit{Rate: core.MaxRate, Period: core.MaxPeriod, Algorithm: core.FixedWindow}
	key := testkit.UniqueKey(t, "big")
	for i := range 2 {
		if r := allowFixed(t, s, []core.Check{{Key: key, Limit: limit}}, 1000); !r.Allowed || r.Remaining != core.MaxRate-1000*(i+1) || r.ResetAfter > limit.Period {
			t.Fatalf("cost 1000: %+v", r)
		}
	}
	if v, _ := c.Get(context.Background(), key).Result(); v != "2000" {
		t.Fatalf("GET = %q; want a counter of 2000", v)
	}
}
