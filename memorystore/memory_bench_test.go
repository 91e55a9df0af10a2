package memorystore_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/memorystore"
)

// BenchmarkMemorySlidingLog decides one key's sliding log at steady state,
// full to its rate: the clock moves period/rate per call, so each call
// trims one unit and adds one. The cost of a call must not grow with the
// rate: compare the two sub-benchmarks' ns/op.
func BenchmarkMemorySlidingLog(b *testing.B) {
	for _, rate := range []int{1000, core.MaxLogRate} {
		b.Run(core.PerMinute(rate).WithAlgorithm(core.SlidingWindowLog).String(), func(b *testing.B) {
			clock := testkit.NewClock(testkit.Start)
			s := testkit.MustMemory(memorystore.WithClock(clock.Now))
			defer s.Close()
			limit := core.PerMinute(rate).WithAlgorithm(core.SlidingWindowLog)
			check := []core.Check{{Key: "rk:log:{ip:192.0.2.1}", Limit: limit}}
			step := time.Minute / time.Duration(rate)
			ctx := context.Background()
			for range rate { // fill the log
				if _, err := s.AllowAllN(ctx, check, 1); err != nil {
					b.Fatal(err)
				}
				clock.Add(step)
			}
			b.ReportAllocs()
			denied := 0
			for b.Loop() {
				res, err := s.AllowAllN(ctx, check, 1)
				if err != nil {
					b.Fatal(err)
				}
				if !res[0].Allowed {
					denied++
				}
				clock.Add(step)
			}
			if denied > b.N/100+1 {
				b.Fatalf("%d of %d denied: the fixture is not at steady state", denied, b.N)
			}
		})
	}
}
