package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// BenchmarkStore measures one decision per call for every algorithm, on
// memorystore.Store and on a real redis-server, at 1 to 256 goroutines, on one hot
// key and on 100k keys. Bare/* is the baseline: a one-line INCR+PEXPIRE
// script and a PING through the same go-redis client.
//
//	go test -run '^$' -bench BenchmarkStore -benchmem ./core
func BenchmarkStore(b *testing.B) {
	srv := redistest.StartServer(b)
	client := srv.Client(b, func(o *redis.Options) { o.PoolSize = 256 })
	ctx := context.Background()
	mem := testkit.MustMemory()
	b.Cleanup(func() { mem.Close() })
	batchedStore := testkit.MustRedis(client, redisstore.WithBatching(redisstore.Batching{MaxBatch: 0, Parallel: 0, MaxWait: 0}))
	b.Cleanup(func() { batchedStore.Close() })
	leased := testkit.MustLeasing(testkit.MustRedis(client))
	b.Cleanup(func() { leased.Close() })
	stores := []struct {
		name  string
		store core.Store
	}{{"memory", mem}, {"redis", testkit.MustRedis(client, redisstore.WithoutBatching())}, {"redis-batched", batchedStore}, {"redis-leased", leased}}
	type keySet struct {
		name string
		keys []string
	}
	// each algorithm keeps its own kind of value: keys of its own
	algKeys := make(map[core.Algorithm][]keySet)
	for _, alg := range testkit.Algorithms {
		p := "bench:" + alg.String() + ":"
		algKeys[alg] = []keySet{{"hot", testkit.BenchKeys(b, p, 1)}, {"100k", testkit.BenchKeys(b, p, 100_000)}}
	}

	for _, st := range stores {
		for _, alg := range testkit.Algorithms {
			keySets := algKeys[alg]
			// a limit no call reaches, so the allowing path is measured;
			// the sliding log keeps a member per unit, so it gets one few
			// calls reach, and denied/op shows when a hot key runs into it
			limit := core.PerSecond(1_000_000).WithAlgorithm(alg) // one unit per µs, GCRA's finest
			if alg == core.SlidingWindowLog {
				limit = core.PerSecond(core.MaxLogRate).WithAlgorithm(alg)
			}
			for _, ks := range keySets {
				for _, g := range testkit.BenchGoroutines {
					b.Run(fmt.Sprintf("%s/%s/%s/g=%d", st.name, alg, ks.name, g), func(b *testing.B) {
						testkit.RunConcurrent(b, g, func(i int) (bool, error) {
							r, err := testkit.AllowOne(st.store, ctx, ks.keys[i%len(ks.keys)], limit, 1)
							return r.Allowed, err
						})
					})
				}
			}
		}
	}

	// the baseline writes plain counters: keys of their own
	keySets := []keySet{{"hot", testkit.BenchKeys(b, "bare:", 1)}, {"100k", testkit.BenchKeys(b, "bare:", 100_000)}}
	bare := redis.NewScript("local c = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return c")
	for _, ks := range keySets {
		for _, g := range testkit.BenchGoroutines {
			b.Run(fmt.Sprintf("bare/incr-pexpire/%s/g=%d", ks.name, g), func(b *testing.B) {
				testkit.RunConcurrent(b, g, func(i int) (bool, error) {
					return true, bare.Run(ctx, client, []string{ks.keys[i%len(ks.keys)]}, 1000).Err()
				})
			})
		}
	}
	for _, g := range testkit.BenchGoroutines {
		b.Run(fmt.Sprintf("bare/ping/g=%d", g), func(b *testing.B) {
			testkit.RunConcurrent(b, g, func(int) (bool, error) { return true, client.Ping(ctx).Err() })
		})
	}
}

// statedStore is a Store that states the traits it is given, whatever the
// store it wraps: a memorystore.Store under it measures the Limiter's own cost on
// the path a remote store takes.
type statedStore struct {
	core.Store
	traits core.Traits
}

func (s statedStore) Traits() core.Traits { return s.traits }

// instantStore allows every check at once and keeps nothing, and states
// that it keeps deadlines: it stands for a remote store whose answer costs
// nothing, so that over it BenchmarkLimiter's limiter and middleware-path
// rows are the Limiter's own cost per decision on the path every remote
// store takes (deadline, breaker, denied-key cache, storage key, results).
type instantStore struct{}

func (instantStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	res := make([]core.Result, len(checks))
	return res, instantStore{}.AllowInto(ctx, checks, n, res)
}

// AllowInto decides into results, as redisstore.Store does, so that the
// Limiter allocates no results for it.
func (instantStore) AllowInto(_ context.Context, checks []core.Check, _ int, results []core.Result) error {
	for i := range checks {
		results[i] = core.Result{Allowed: true, Limit: checks[i].Limit, Remaining: checks[i].Limit.Capacity() - 1, ResetAfter: time.Millisecond}
	}
	return nil
}

func (instantStore) Close() error        { return nil }
func (instantStore) Traits() core.Traits { return core.Traits{KeepsDeadlines: true} }

// BenchmarkLimiter measures Limiter.Check with one rule beside the bare
// store call it makes (store/…, over the same store and keys), so that the
// difference in allocs/op and B/op is the Limiter's own, and CheckInto as
// the middlewares call it (middleware-path/…, into a block of results the
// request owns, which spares Check's one allocation): over a memorystore.Store
// (in process), over a memorystore.Store stating itself remote (with and without
// KeepsDeadlines), over a store that answers at once (instantStore: the
// Limiter's own cost), and over a real redis-server through a client of
// go-redis's default options and through one with ContextTimeoutEnabled
// and MaxRetries -1, as the README's quick start builds it (both batching,
// so both called on the request's goroutine); at 1 and 16 goroutines, and
// over Redis at 256 too.
//
//	go test -run '^$' -bench BenchmarkLimiter -benchmem ./core
func BenchmarkLimiter(b *testing.B) {
	srv := redistest.StartServer(b)
	plain := srv.Client(b)
	keeps := srv.Client(b, func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries = true, -1 })
	mem := testkit.MustMemory()
	b.Cleanup(func() { mem.Close() })
	// over Redis also at 256 goroutines, where the client's CPU per
	// decision bounds a machine whose cores it shares with Redis
	inProcess, overRedis := []int{1, 16}, []int{1, 16, 256}
	stores := []struct {
		name       string
		store      core.Store
		goroutines []int
	}{
		{"memory", mem, inProcess},
		{"memory-remote", statedStore{Store: mem}, inProcess},
		{"memory-keeps", statedStore{Store: mem, traits: core.Traits{KeepsDeadlines: true}}, inProcess},
		{"instant", instantStore{}, inProcess},
		{"redis", testkit.MustRedis(plain), overRedis},
		{"redis-keeps", testkit.MustRedis(keeps), overRedis},
	}
	reqs, rules := benchRequests()
	limit := rules[0].Limit
	for _, st := range stores {
		// a deadline a loaded machine never misses: the call is measured, not the failure policy
		l, err := core.NewLimiter(st.store, core.WithTimeout(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		keys := make([]string, nkeys)
		for i, r := range reqs {
			if keys[i], err = l.StorageKey("bench", r.(*benchRequest).id); err != nil {
				b.Fatal(err)
			}
		}
		for _, g := range st.goroutines {
			b.Run(fmt.Sprintf("%s/store/g=%d", st.name, g), func(b *testing.B) {
				testkit.RunConcurrentEach(b, g, func() func(int) (bool, error) {
					var checks [1]core.Check // reused: the store may not keep it past the call
					return func(i int) (bool, error) {
						checks[0] = core.Check{Key: keys[i%nkeys], Limit: limit}
						res, err := st.store.AllowAllN(context.Background(), checks[:], 1)
						return err == nil && res[0].Allowed, err
					}
				})
			})
			b.Run(fmt.Sprintf("%s/limiter/g=%d", st.name, g), func(b *testing.B) {
				testkit.RunConcurrent(b, g, func(i int) (bool, error) {
					d, err := benchDecided(l.Check(context.Background(), reqs[i%nkeys], rules))
					return d.Allowed, err
				})
			})
			// as the middlewares decide: CheckInto a block of results the
			// request owns (each goroutine's own, reused once the decision
			// is done with, as a request's goroutine would)
			b.Run(fmt.Sprintf("%s/middleware-path/g=%d", st.name, g), func(b *testing.B) {
				testkit.RunConcurrentEach(b, g, func() func(int) (bool, error) {
					var block [2]core.RuleResult
					return func(i int) (bool, error) {
						d, err := benchDecided(l.CheckInto(context.Background(), reqs[i%nkeys], rules, block[:0]))
						return d.Allowed, err
					}
				})
			})
		}
	}
}

// BenchmarkCountOnly measures a decision that is given back, as a
// count-only rule's middleware gives back every request that does not
// count: Limiter.CheckInto and then Limiter.Refund, over a batching
// redisstore.Store (the quick start's client) on a private redis-server,
// 1000 keys, at 16 and 64 goroutines. The refunds go through the store's
// pipelines for quota calls, beside the decisions':
//
//	go test -run '^$' -bench BenchmarkCountOnly -benchtime 100000x ./core
func BenchmarkCountOnly(b *testing.B) {
	srv := redistest.StartServer(b)
	keeps := srv.Client(b, func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries = true, -1 })
	// a deadline a loaded machine never misses: the calls are measured
	l, err := core.NewLimiter(testkit.MustRedis(keeps), core.WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	reqs, rules := benchRequests()
	for _, g := range []int{16, 64} {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
			testkit.RunConcurrentEach(b, g, func() func(int) (bool, error) {
				var block [2]core.RuleResult
				return func(i int) (bool, error) {
					d, err := benchDecided(l.CheckInto(context.Background(), reqs[i%nkeys], rules, block[:0]))
					if err != nil {
						return false, err
					}
					return d.Allowed, l.Refund(context.Background(), d)
				}
			})
		})
	}
}

// nkeys is how many identities the Limiter benchmarks cycle through.
const nkeys = 1000

// benchRequests returns nkeys requests of distinct identities, boxed once
// (a request is the adapter's cost, not the Limiter's), and one rule keyed
// by their identity with a limit no call reaches: the allowing path.
func benchRequests() ([]core.Request, []core.Rule) {
	reqs := make([]core.Request, nkeys)
	for i := range reqs {
		reqs[i] = &benchRequest{id: fmt.Sprintf("ip:10.0.%d.%d", i>>8, i&255)}
	}
	rules := []core.Rule{{Name: "bench", Limit: core.PerSecond(1_000_000), Key: func(r core.Request) (string, error) {
		return r.(*benchRequest).id, nil
	}}}
	return reqs, rules
}

// benchDecided returns d and err, with an error when d is not what the
// benchmarks' one rule decides over a store that answers: one result, not
// degraded.
func benchDecided(d core.Decision, err error) (core.Decision, error) {
	if err == nil && (len(d.Results) != 1 || d.Degraded()) {
		err = fmt.Errorf("fixture: %d results, degraded %v", len(d.Results), d.Degraded())
	}
	return d, err
}

// benchRequest is a core.Request of one identity, which the benchmark's
// key function reads.
type benchRequest struct {
	staticRequest
	id string
}

// BenchmarkBatchingAlone measures what batching, the default, costs a lone
// caller: Limiter.Check with one rule at one goroutine over a redisstore.Store
// with batching and one without, on 1000 keys of a private redis-server,
// through a client of go-redis's default options (batched, pipelines go
// out from the store's senders; unbatched, each call gets a goroutine of
// its own) and through one with ContextTimeoutEnabled, as the README's
// quick start builds it. Each of 7
// rounds alternates the two stores in blocks of 100 decisions, so that
// both see the same load of a shared machine, and reports batched
// decisions/s over unbatched; the median of the rounds, for each client:
//
//	go test -run '^$' -bench BenchmarkBatchingAlone -benchtime 20000x ./core |
//	  awk '/batched\/unbatched/ {split($1, p, "/"); for (i = 2; i <= NF; i++)
//	    if ($i == "batched/unbatched") print p[2], $(i-1)}' |
//	  sort -k1,1 -k2n | awk '{r[$1] = r[$1] " " $2} END {for (c in r) print c, r[c]}'
//
// prints each client's 7 ratios in order: the fourth is the median.
func BenchmarkBatchingAlone(b *testing.B) {
	srv := redistest.StartServer(b)
	b.Run("client=default", func(b *testing.B) { batchingAlone(b, srv.Client(b)) })
	b.Run("client=keeps-deadlines", func(b *testing.B) {
		batchingAlone(b, srv.Client(b, func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries = true, -1 }))
	})
}

// batchingAlone runs BenchmarkBatchingAlone's rounds over client.
func batchingAlone(b *testing.B, client *redis.Client) {
	limit := core.PerSecond(1_000_000) // a limit no call reaches: the allowing path
	const nkeys = 1000
	reqs := make([]core.Request, nkeys)
	for i := range reqs {
		reqs[i] = &benchRequest{id: fmt.Sprintf("ip:10.1.%d.%d", i>>8, i&255)}
	}
	rules := []core.Rule{{Name: "alone", Limit: limit, Key: func(r core.Request) (string, error) {
		return r.(*benchRequest).id, nil
	}}}
	var limiters [2]*core.Limiter // unbatched, batched
	for i, opt := range []redisstore.Option{redisstore.WithoutBatching(), redisstore.WithBatching(redisstore.Batching{})} {
		store := testkit.MustRedis(client, opt)
		b.Cleanup(func() { store.Close() })
		l, err := core.NewLimiter(store, core.WithTimeout(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		limiters[i] = l
	}
	for round := 1; round <= aloneRounds; round++ {
		b.Run(fmt.Sprintf("round=%d", round), func(b *testing.B) {
			b.ReportAllocs()
			var (
				spent [2]time.Duration
				n     [2]int
			)
			for i := range b.N {
				which := (i / aloneBlock) % 2
				t0 := time.Now()
				d, err := limiters[which].Check(context.Background(), reqs[i%nkeys], rules)
				spent[which] += time.Since(t0)
				n[which]++
				if err != nil || d.Degraded() || !d.Allowed {
					b.Fatalf("fixture: decision %+v, %v: want allowed by Redis", d, err)
				}
			}
			if n[1] == 0 {
				return // a calibration run too short for both
			}
			rate := func(k int) float64 { return float64(n[k]) / spent[k].Seconds() }
			b.ReportMetric(rate(0), "unbatched/s")
			b.ReportMetric(rate(1), "batched/s")
			b.ReportMetric(rate(1)/rate(0), "batched/unbatched")
		})
	}
}

// BenchmarkBatchingAlone's rounds, and the decisions of each store in a
// row within a round.
const (
	aloneRounds = 7
	aloneBlock  = 100
)
