package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// BenchmarkBatchLatency compares GCRA through a batching store with the bare
// INCR+PEXPIRE script through the same client, as BenchmarkStore does, and
// reports each call's p50 and p99 latency besides decisions/s. The two run
// in turn within each case, so their ratios are read from the same moment.
//
//	go test -run '^$' -bench BenchmarkBatchLatency ./core
func BenchmarkBatchLatency(b *testing.B) {
	srv := redistest.StartServer(b)
	client := srv.Client(b, func(o *redis.Options) { o.PoolSize = 256 })
	ctx := context.Background()
	// RATEKIT_BENCH_BATCHING="maxBatch,parallel" tries other settings
	var maxBatch, parallel int
	if v := os.Getenv("RATEKIT_BENCH_BATCHING"); v != "" {
		if _, err := fmt.Sscanf(v, "%d,%d", &maxBatch, &parallel); err != nil {
			b.Fatalf("RATEKIT_BENCH_BATCHING=%q: %v", v, err)
		}
	}
	batched := testkit.MustRedis(client, redisstore.WithBatching(redisstore.Batching{MaxBatch: maxBatch, Parallel: parallel, MaxWait: 0}))
	b.Cleanup(func() { batched.Close() })
	// a limit no run reaches: every call is an allowed decision and a write
	limit := core.PerSecond(1_000_000) // one unit per µs, GCRA's finest
	bare := redis.NewScript("local c = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return c")
	for _, ks := range []struct {
		name string
		n    int
	}{{"hot", 1}, {"100k", 100_000}} {
		gk := testkit.BenchKeys(b, "batchlat:gcra:", ks.n)
		bk := testkit.BenchKeys(b, "batchlat:bare:", ks.n)
		for _, g := range testkit.BenchGoroutines {
			b.Run(fmt.Sprintf("batched/%s/g=%d", ks.name, g), func(b *testing.B) {
				runLatency(b, g, func(i int) error {
					_, err := testkit.AllowOne(batched, ctx, gk[i%len(gk)], limit, 1)
					return err
				})
			})
			b.Run(fmt.Sprintf("bare/%s/g=%d", ks.name, g), func(b *testing.B) {
				runLatency(b, g, func(i int) error {
					return bare.Run(ctx, client, []string{bk[i%len(bk)]}, 1000).Err()
				})
			})
		}
	}
}

// runLatency calls do b.N times in total from g goroutines and reports
// decisions/s and the p50 and p99 of the calls' latencies in µs.
func runLatency(b *testing.B, g int, do func(i int) error) {
	b.ReportAllocs()
	var next atomic.Int64
	lat := make([][]time.Duration, g)
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ResetTimer()
	begin := time.Now()
	for w := range g {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t := time.Now()
				if err := do(int(i)); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	b.StopTimer()
	if p := firstErr.Load(); p != nil {
		b.Fatal(*p)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkBatchedLimits measures calls of two GCRA limits of one identity
// (decide.lua's, all or nothing) through a batching store over a private
// redis-server and the quick start's client, on one identity and on 1000
// taken in turn, at 1, 64 and 256 goroutines: calls that share a pipeline
// share a script call (decide_many.lua).
//
//	go test -run '^$' -bench BenchmarkBatchedLimits -benchtime 60000x ./redisstore
func BenchmarkBatchedLimits(b *testing.B) {
	srv := redistest.StartServer(b)
	client := srv.Client(b, func(o *redis.Options) { o.PoolSize, o.ContextTimeoutEnabled, o.MaxRetries = 256, true, -1 })
	st := testkit.MustRedis(client)
	b.Cleanup(func() { st.Close() })
	perSecond, perMinute := core.PerSecond(1_000_000), core.PerMinute(60_000_000) // no call reaches them
	for _, ids := range []int{1, 1000} {
		keys := make([][2]string, ids)
		for i := range keys {
			id := fmt.Sprintf("ip:10.0.%d.%d", i>>8, i&255)
			for j, rule := range []string{"second", "minute"} {
				k, err := testkit.KeyOf("limits:", rule, id)
				if err != nil {
					b.Fatal(err)
				}
				keys[i][j] = k
			}
		}
		for _, g := range []int{1, 64, 256} {
			b.Run(fmt.Sprintf("identities=%d/g=%d", ids, g), func(b *testing.B) {
				testkit.RunConcurrentEach(b, g, func() func(int) (bool, error) {
					var checks [2]core.Check
					return func(i int) (bool, error) {
						k := keys[i%ids]
						checks[0] = core.Check{Key: k[0], Limit: perSecond}
						checks[1] = core.Check{Key: k[1], Limit: perMinute}
						res, err := st.AllowAllN(context.Background(), checks[:], 1)
						return err == nil && res[0].Allowed && res[1].Allowed, err
					}
				})
			})
		}
	}
}
