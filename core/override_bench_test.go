package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
)

// BenchmarkOverride measures what a rule that takes overrides costs next
// to a plain one, through a Limiter over a private redis-server, on 1000
// identities of which every other one has an override: allocations per
// decision (-benchmem) and Redis's own time per script call (INFO
// commandstats). "plain" runs the one-key GCRA script, "overrides" the
// generic decide script with override.lua, which reads one key more.
//
//	go test -run '^$' -bench BenchmarkOverride -benchmem -benchtime 20000x ./core
func BenchmarkOverride(b *testing.B) {
	srv := redistest.StartServer(b)
	client := srv.Client(b, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	store := testkit.MustRedis(client)
	b.Cleanup(func() { store.Close() })
	l, err := core.NewLimiter(store, core.WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	ctx := context.Background()
	ids := testkit.BenchKeys(b, "id:", 1000)
	limit := core.PerSecond(1_000_000) // no call reaches it: every call writes
	for _, overrides := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "overrides"}[overrides]
		b.Run(name, func(b *testing.B) {
			rules := make([][]core.Rule, len(ids))
			for i, id := range ids {
				rules[i] = []core.Rule{rule("api", limit, id)}
				rules[i][0].Overrides = overrides
				if overrides && i%2 == 0 {
					if err := l.SetOverride(ctx, rules[i][0], id, core.PerSecond(999_999), 0); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := client.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			req := staticRequest{ctx}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				d, err := l.Check(ctx, req, rules[i%len(rules)])
				if err != nil || !d.Allowed {
					b.Fatalf("%+v %v", d, err)
				}
				if want := overrides && i%2 == 0; (d.Results[0].Limit != limit) != want || d.Results[0].Degraded {
					b.Fatalf("fixture: decision under %v", d.Results[0].Limit)
				}
			}
			b.StopTimer()
			calls, usec := testkit.EvalshaStats(b, ctx, client)
			if calls < int64(b.N) {
				b.Fatalf("fixture: %d script calls for %d decisions", calls, b.N)
			}
			b.ReportMetric(usec/float64(calls), "redis-µs/call")
		})
	}
}
