package redisstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// BenchmarkRedisTime measures what GCRA's scripts cost Redis itself, from
// INFO commandstats of a private redis-server: redis-µs/call is the
// server's time per EVALSHA, and redis-µs/decision that time divided by
// the decisions made. "single" makes one-key calls in turn (gcra_single.lua),
// "many" lets 64 goroutines share a batching store (gcra_many.lua), and
// "slidingcounter-single" makes one-key calls of the sliding window counter
// in turn (slidingcounter_single.lua).
//
//	go test -run '^$' -bench BenchmarkRedisTime -benchtime 20000x ./redisstore
func BenchmarkRedisTime(b *testing.B) {
	srv := redistest.StartServer(b)
	client := srv.Client(b, func(o *redis.Options) { o.PoolSize = 128 })
	ctx := context.Background()
	plain := testkit.MustRedis(client, redisstore.WithoutBatching())
	batched := testkit.MustRedis(client, redisstore.WithBatching(redisstore.Batching{}))
	b.Cleanup(func() { batched.Close() })
	limit := core.PerSecond(1_000_000) // no call reaches it: every call writes
	keys := testkit.BenchKeys(b, "rtime:", 1000)
	for _, c := range []struct {
		name  string
		store core.Store
		g     int
		limit core.Limit
	}{
		{"single", plain, 1, limit},
		{"many", batched, 64, limit},
		{"slidingcounter-single", plain, 1, limit.WithAlgorithm(core.SlidingWindowCounter)},
	} {
		b.Run(c.name, func(b *testing.B) {
			if err := client.FlushAll(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			if err := client.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			testkit.RunConcurrent(b, c.g, func(i int) (bool, error) {
				r, err := testkit.AllowOne(c.store, ctx, keys[i%len(keys)], c.limit, 1)
				return r.Allowed, err
			})
			calls, usec := testkit.EvalshaStats(b, ctx, client)
			b.ReportMetric(usec/float64(calls), "redis-µs/call")
			b.ReportMetric(usec/float64(b.N), "redis-µs/decision")
		})
	}
}

// BenchmarkQuota measures a peek, a refund and a reset of one key of each
// algorithm through a redisstore.Store on a real redis-server, one call at a
// time: each is one round trip (a reset also publishes its key).
//
//	go test -run '^$' -bench BenchmarkQuota -benchmem ./core
func BenchmarkQuota(b *testing.B) {
	srv := redistest.StartServer(b)
	client := srv.Client(b)
	ctx := context.Background()
	s := testkit.MustRedis(client)
	keys := testkit.BenchKeys(b, "quota:", 1000)
	for _, alg := range testkit.Algorithms {
		limit := core.PerHour(1000).WithAlgorithm(alg)
		for _, k := range keys { // keys with state to read and give back to
			if _, err := testkit.AllowOne(s, ctx, k, limit, 1); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("peek/"+alg.String(), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				res, err := s.PeekAll(ctx, []core.Check{{Key: keys[i%len(keys)], Limit: limit}})
				if err != nil || !res[0].Allowed {
					b.Fatalf("%+v, %v", res, err)
				}
			}
		})
		b.Run("refund/"+alg.String(), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				res, err := s.RefundAllN(ctx, []core.Check{{Key: keys[i%len(keys)], Limit: limit}}, 1)
				if err != nil || !res[0].Allowed {
					b.Fatalf("%+v, %v", res, err)
				}
			}
		})
	}
	b.Run("reset", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := s.Reset(ctx, keys[i%len(keys)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFixedScript sets the fixed window's one-key script beside the
// bare script it competes with, `INCR` and `PEXPIRE` in one line, over one
// private redis-server: decisions/s from the client, redis-µs/call from
// INFO commandstats, at 1 and 64 goroutines, on one hot key and on 100k
// keys (mostly the first unit of a window: the script's TIME path). The
// limit is a minute's, as the comparison's, which no call reaches.
//
//	go test -run '^$' -bench BenchmarkFixedScript -benchtime 1s -count 5 ./core
func BenchmarkFixedScript(b *testing.B) {
	srv := redistest.StartServer(b)
	client := srv.Client(b, func(o *redis.Options) { o.PoolSize = 128 })
	ctx := context.Background()
	store := testkit.MustRedis(client, redisstore.WithoutBatching())
	limit := core.PerMinute(1 << 30).WithAlgorithm(core.FixedWindow)
	bare := redis.NewScript("local c = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return c")
	keySets := []struct {
		name string
		keys []string
	}{{"hot", testkit.BenchKeys(b, "fxs:", 1)}, {"100k", testkit.BenchKeys(b, "fxs:", 100_000)}}
	for _, ks := range keySets {
		for _, g := range []int{1, 64} {
			for _, c := range []struct {
				name   string
				decide func(key string) (bool, error)
			}{
				{"fixed", func(key string) (bool, error) {
					r, err := testkit.AllowOne(store, ctx, key, limit, 1)
					return r.Allowed, err
				}},
				{"bare", func(key string) (bool, error) {
					return true, bare.Run(ctx, client, []string{key}, 60000).Err()
				}},
			} {
				b.Run(fmt.Sprintf("%s/%s/g=%d", c.name, ks.name, g), func(b *testing.B) {
					if err := client.FlushAll(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					if err := client.ConfigResetStat(ctx).Err(); err != nil {
						b.Fatal(err)
					}
					testkit.RunConcurrent(b, g, func(i int) (bool, error) { return c.decide(ks.keys[i%len(ks.keys)]) })
					calls, usec := testkit.EvalshaStats(b, ctx, client)
					b.ReportMetric(usec/float64(calls), "redis-µs/call")
				})
			}
		}
	}
}
