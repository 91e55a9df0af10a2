package outbound_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/outbound"
	"github.com/ratekit/ratekit/redisstore"
)

// BenchmarkReserve measures one turn against a real redis-server, beside a
// plain GCRA decision of the library (core's RedisStore, one key) on the
// same server, and reports the script calls each costs and Redis's own time
// per call (INFO commandstats).
//
//	go test -run '^$' -bench BenchmarkReserve -benchmem -benchtime 20000x ./outbound
func BenchmarkReserve(b *testing.B) {
	srv := redistest.StartServer(b)
	rdb := srv.Client(b, func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.MaxRetries = -1 })
	ctx := context.Background()
	b.Run("outbound.Reserve", func(b *testing.B) {
		// a deadline a loaded machine never misses: the call is measured, not the failure policy
		l, err := outbound.New(rdb, "bench", outbound.Limit{Rate: 1 << 30, Period: time.Hour, Burst: 1 << 30},
			outbound.WithHeartbeat(time.Hour), outbound.WithTimeout(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		counted(b, rdb, func() {
			for i := 0; b.Loop(); i++ {
				r, err := l.Reserve(ctx, "k")
				if err != nil || r.Degraded() {
					b.Fatal(err, r.Degraded())
				}
			}
		})
	})
	b.Run("core.GCRA", func(b *testing.B) {
		store, err := redisstore.New(rdb, redisstore.WithoutBatching())
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		checks := []core.Check{{Key: "ratekit:bench:{k}", Limit: core.PerHour(1 << 30)}}
		counted(b, rdb, func() {
			for b.Loop() {
				res, err := store.AllowAllN(ctx, checks, 1)
				if err != nil || !res[0].Allowed {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkReserveConcurrent measures reservations at 1 to 256 goroutines
// at once over 1000 keys, through the quick start's client, and reports
// the script calls and Redis's time per call as BenchmarkReserve does:
// over a *redis.Client the reservations that overlap share pipelined round
// trips.
//
//	go test -run '^$' -bench BenchmarkReserveConcurrent -benchmem -benchtime 100000x ./outbound
func BenchmarkReserveConcurrent(b *testing.B) {
	srv := redistest.StartServer(b)
	rdb := srv.Client(b, func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries, o.PoolSize = true, -1, 256 })
	ctx := context.Background()
	l, err := outbound.New(rdb, "bench", outbound.Limit{Rate: 1 << 30, Period: time.Hour, Burst: 1 << 30},
		outbound.WithHeartbeat(time.Hour), outbound.WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	for _, g := range testkit.BenchGoroutines {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
			counted(b, rdb, func() {
				testkit.RunConcurrent(b, g, func(i int) (bool, error) {
					r, err := l.Reserve(ctx, keys[i%len(keys)])
					if err == nil && r.Degraded() {
						err = errors.New("a turn decided without Redis")
					}
					return err == nil, err
				})
			})
		})
	}
}

// counted runs f and reports the script calls Redis counted per op of b,
// and Redis's time per script call.
func counted(b *testing.B, rdb *redis.Client, f func()) {
	ctx := context.Background()
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	f()
	calls, usec := testkit.EvalshaStats(b, ctx, rdb)
	b.ReportMetric(float64(calls)/float64(b.N), "redis-calls/op")
	if calls > 0 {
		b.ReportMetric(usec/float64(calls), "redis-µs/call")
	}
}

// BenchmarkArrivalGaps runs four processes at once the upstream's rate
// through the outbound throttle, and one process through a single
// golang.org/x/time/rate Limiter of that rate, each against the sliding-log
// upstream, and reports the gaps between accepted arrivals (their 1st,
// 10th and 50th percentiles, in ms) and the Redis calls per request sent.
// The fleet's arrivals should be no burstier than the single limiter's.
func BenchmarkArrivalGaps(b *testing.B) {
	if testing.Short() {
		b.Skip("multi-process run of seconds")
	}
	const run = 4 * time.Second
	for b.Loop() {
		fleetGaps, calls := fleetArrivals(b, run)
		single := singleArrivals(b, run)
		report(b, "fleet", fleetGaps)
		report(b, "xrate", single)
		b.ReportMetric(calls, "redis-calls/sent")
	}
}

func report(b *testing.B, name string, g []time.Duration) {
	if len(g) == 0 {
		b.Fatalf("%s: no arrivals", name)
	}
	ms := func(q int) float64 { return float64(g[len(g)*q/100]) / float64(time.Millisecond) }
	b.ReportMetric(ms(1), name+"-gap-p1-ms")
	b.ReportMetric(ms(10), name+"-gap-p10-ms")
	b.ReportMetric(ms(50), name+"-gap-p50-ms")
}

// fleetArrivals runs the four processes at 1x and returns the gaps and the
// script calls per request sent.
func fleetArrivals(b *testing.B, run time.Duration) ([]time.Duration, float64) {
	f := newFleet(b)
	f.redis.ResetStats(b, context.Background())
	f.launch(loadOf(true, 1, run))
	clients := f.wait()
	st := f.redis.CommandStats(b, context.Background())
	sent := 0
	for _, c := range clients {
		if c != nil {
			sent += c.Sent
		}
	}
	scripts := st["evalsha"] + st["eval"]
	return gaps(f.up.log(), f.start, time.Second, run), float64(scripts) / float64(sent)
}

// singleArrivals runs one process at 1x through one x/time/rate Limiter.
func singleArrivals(b *testing.B, run time.Duration) []time.Duration {
	u := &upstream{limit: upstreamRate}
	srv := httptest.NewServer(u)
	defer srv.Close()
	lim := rate.NewLimiter(rate.Limit(upstreamRate/1.03), 1) // the fleet's margin, for a like comparison
	start := time.Now()
	var wg sync.WaitGroup
	every := time.Second / upstreamRate
	for next := start; next.Before(start.Add(run)); next = next.Add(every) {
		time.Sleep(time.Until(next))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			if lim.Wait(ctx) != nil {
				return
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	g := gaps(u.log(), start, time.Second, run)
	slices.Sort(g)
	return g
}
