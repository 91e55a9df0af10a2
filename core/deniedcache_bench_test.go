package core

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratekit/ratekit/internal/redistest"
)

// BenchmarkDeniedCache compares a decision answered by the denied-key cache
// with the same decision made by a real redis-server, on a set of keys that
// Redis denies for an hour. hit and redis measure one group's decision
// (what the cache replaces); check-hit and check-redis the whole
// Limiter.Check around it, which also builds the key and the Decision.
// Each sub-benchmark checks with INFO commandstats that it measures what it
// claims: no script call for the cache, one per decision for Redis.
func BenchmarkDeniedCache(b *testing.B) {
	srv := redistest.StartServer(b)
	store := NewRedisStore(srv.Client(b))
	// a deadline a loaded machine meets: every decision must be Redis's
	cached, err := NewLimiter(store, WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer cached.Close()
	uncached, err := NewLimiter(store, WithDeniedCache(0), WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer uncached.Close()

	const nkeys = 1024
	limit := PerHour(1)
	ids := make([]string, nkeys)
	groups := make([][]Check, nkeys)
	ctx := context.Background()
	results := make([]Result, 1)
	for i := range groups {
		ids[i] = fmt.Sprintf("ip:10.0.%d.%d", i>>8, i&255)
		k, err := cached.StorageKey("r", ids[i])
		if err != nil {
			b.Fatal(err)
		}
		groups[i] = []Check{{Key: k, Limit: limit}}
		for range 2 { // spend the hour's unit, then get denied (and cached)
			if _, err := cached.decideGroup(ctx, groups[i], 1, results); err != nil {
				b.Fatal(err)
			}
		}
		if results[0].Allowed || results[0].Degraded {
			b.Fatalf("fixture: key %d not denied by Redis: %+v", i, results[0])
		}
	}
	scripts := func() int64 {
		st := srv.CommandStats(b, ctx)
		return st["evalsha"] + st["eval"]
	}
	decide := func(l *Limiter, wantCalls bool) func(b *testing.B) {
		return func(b *testing.B) {
			before := scripts()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := l.decideGroup(ctx, groups[i%nkeys], 1, results); err != nil || results[0].Allowed || results[0].Degraded {
					b.Fatalf("not a denial from Redis: %+v, %v", results[0], err)
				}
				i++
			}
			b.StopTimer()
			checkCalls(b, scripts()-before, i, wantCalls)
		}
	}
	check := func(l *Limiter, wantCalls bool) func(b *testing.B) {
		return func(b *testing.B) {
			var id string
			rules := []Rule{identityRule("r", limit, &id)}
			before := scripts()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id = ids[i%nkeys]
				d, err := l.Check(ctx, emptyRequest{}, rules)
				if err != nil || d.Allowed || d.Degraded() {
					b.Fatalf("not a denial from Redis: %+v, %v", d, err)
				}
				i++
			}
			b.StopTimer()
			checkCalls(b, scripts()-before, i, wantCalls)
		}
	}
	b.Run("hit", decide(cached, false))
	b.Run("redis", decide(uncached, true))
	b.Run("check-hit", check(cached, false))
	b.Run("check-redis", check(uncached, true))
}

func checkCalls(b *testing.B, calls int64, decisions int, want bool) {
	b.Helper()
	switch {
	case want && calls < int64(decisions):
		b.Fatalf("fixture: %d script calls for %d decisions through Redis", calls, decisions)
	case !want && calls != 0:
		b.Fatalf("fixture: %d script calls for %d cached decisions", calls, decisions)
	}
}
