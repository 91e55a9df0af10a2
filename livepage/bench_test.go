package livepage_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/livepage"
)

// BenchmarkLimiter measures Limiter.CheckInto (the middlewares' path) with
// one rule over 1000 identities and a limit no call reaches (the allowing
// path), without an observer and with the live page's Recorder, over the
// memory store (in process: the Limiter's own cost, where the Recorder's
// share is largest) and a real redis-server, at 1 and 64 goroutines. The
// ratio of the pairs' ns/op is the Recorder's cost; allocs/op must match.
//
//	go test -run '^$' -bench BenchmarkLimiter -benchmem ./livepage
func BenchmarkLimiter(b *testing.B) {
	srv := redistest.StartServer(b)
	client := srv.Client(b)
	mem := testkit.MustMemory()
	b.Cleanup(func() { mem.Close() })
	stores := []struct {
		name  string
		store core.Store
	}{{"memory", mem}, {"redis", testkit.MustRedis(client)}}
	reqs := make([]core.Request, 1000)
	for i := range reqs {
		reqs[i] = idRequest(fmt.Sprintf("ip:10.0.%d.%d", i>>8, i&255))
	}
	rules := []core.Rule{{Name: "bench", Limit: core.PerSecond(1_000_000), Key: func(r core.Request) (string, error) {
		return r.RemoteAddr(), nil
	}}}
	for _, st := range stores {
		limiters := make([]*core.Limiter, 2) // without and with the Recorder
		for i := range limiters {
			opts := []core.Option{core.WithTimeout(time.Second)}
			if i == 1 {
				rec, err := livepage.NewRecorder(livepage.RecorderOptions{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { rec.Close() })
				opts = append(opts, core.WithObserver(rec))
			}
			l, err := core.NewLimiter(st.store, opts...)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			limiters[i] = l
		}
		// each pair side by side, so that a busy machine's drift touches both alike
		for _, g := range []int{1, 64} {
			for i, name := range []string{"none", "recorder"} {
				l := limiters[i]
				b.Run(fmt.Sprintf("%s/g=%d/%s", st.name, g, name), func(b *testing.B) {
					testkit.RunConcurrentEach(b, g, func() func(int) (bool, error) {
						var block [1]core.RuleResult
						return func(i int) (bool, error) {
							d, err := l.CheckInto(context.Background(), reqs[i%len(reqs)], rules, block[:0])
							if err == nil && (len(d.Results) != 1 || d.Results[0].Degraded) {
								err = fmt.Errorf("fixture: %d results, degraded %v", len(d.Results), d.Degraded())
							}
							return d.Allowed, err
						}
					})
				})
			}
		}
	}
}

// BenchmarkSummaryMemory reports the heap a Recorder holds for one rule
// whose summaries are full (every counter taken by an identity of 20
// bytes): B/rule. It is fixed by RecorderOptions.Counters, whatever the
// number of identities.
//
//	go test -run '^$' -bench BenchmarkSummaryMemory -benchtime 1x ./livepage
func BenchmarkSummaryMemory(b *testing.B) {
	for _, k := range []int{livepage.DefaultCounters, 1000} {
		b.Run(fmt.Sprintf("counters=%d", k), func(b *testing.B) {
			ctx := context.Background()
			var perRule float64
			for range b.N {
				rec, err := livepage.NewRecorder(livepage.RecorderOptions{Counters: k})
				if err != nil {
					b.Fatal(err)
				}
				lim := core.PerMinute(10)
				ids := make([]string, 20*k) // four summaries of k, filled past
				for i := range ids {
					ids[i] = fmt.Sprintf("ip:10.%03d.%03d.%03d", i>>16&255, i>>8&255, i&255)
				}
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for _, id := range ids {
					rec.DecidedIdentity(ctx, core.DecisionEvent{Rule: "r", Result: core.Result{Limit: lim}}, id)
					rec.DecidedIdentity(ctx, core.DecisionEvent{Rule: "r", Result: core.Result{Allowed: true, Limit: lim}}, id)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				// the identities were made before: the summaries hold the
				// caller's strings, not copies
				perRule = float64(after.HeapAlloc) - float64(before.HeapAlloc)
				runtime.KeepAlive(ids)
				rec.Close()
			}
			b.ReportMetric(perRule, "B/rule")
		})
	}
}

// BenchmarkRecorderAllowed measures what the Recorder adds to one allowed
// decision, alone: DecidedIdentity of an allowance far from the limit, on
// 1 and 64 goroutines, over 1000 identities. Set beside
// BenchmarkLimiter's none rows, it is the observer's share of a decision
// on a machine too busy for the pairs' difference to show.
//
//	go test -run '^$' -bench BenchmarkRecorderAllowed -benchmem ./livepage
func BenchmarkRecorderAllowed(b *testing.B) {
	rec, err := livepage.NewRecorder(livepage.RecorderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rec.Close() })
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("ip:10.0.%d.%d", i>>8, i&255)
	}
	e := core.DecisionEvent{Rule: "bench", Result: core.Result{Allowed: true, Limit: core.PerSecond(1_000_000), Remaining: 999_999}}
	ctx := context.Background()
	for _, g := range []int{1, 64} {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
			testkit.RunConcurrent(b, g, func(i int) (bool, error) {
				rec.DecidedIdentity(ctx, e, ids[i%len(ids)])
				return true, nil
			})
		})
	}
}
