package promlimit_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/promlimit"
)

// BenchmarkDecided measures one rule decision's cost to the Collector, from
// all goroutines at once over 8 rules, and checks that every decision was
// counted.
func BenchmarkDecided(b *testing.B) {
	c := promlimit.MustNew()
	ctx := context.Background()
	var events [8]core.DecisionEvent
	for i := range events {
		events[i] = core.DecisionEvent{
			Rule:   "rule-" + strconv.Itoa(i),
			Result: core.Result{Limit: core.PerMinute(100), Allowed: i%4 != 0, Remaining: 10 * i},
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			c.Decided(ctx, events[i%len(events)])
			i++
		}
	})
	b.StopTimer()
	families, err := gatherer(c).Gather()
	if err != nil {
		b.Fatal(err)
	}
	var counted uint64
	for _, f := range families {
		if f.GetName() == "ratekit_quota_used_ratio" {
			for _, m := range f.GetMetric() {
				counted += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if counted != uint64(b.N) {
		b.Fatalf("%d decisions counted, want %d", counted, b.N)
	}
}

// BenchmarkStoreCalled measures timing a successful and a failed store call.
func BenchmarkStoreCalled(b *testing.B) {
	for _, bc := range []struct {
		name string
		err  error
	}{{"ok", nil}, {"error", errors.New("down")}} {
		b.Run(bc.name, func(b *testing.B) {
			c := promlimit.MustNew()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.StoreCalled(time.Millisecond, bc.err)
				}
			})
		})
	}
}
