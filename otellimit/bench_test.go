package otellimit_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/otellimit"
)

// BenchmarkDecided measures what one rule decision costs the Observer,
// from every goroutine at once over 8 rules of every outcome: on the
// OpenTelemetry SDK, where it checks that every decision was recorded,
// and on the no-op MeterProvider, which leaves the Observer's own work.
func BenchmarkDecided(b *testing.B) {
	var events [8]core.DecisionEvent
	for i := range events {
		events[i] = core.DecisionEvent{
			Rule:   "rule-" + strconv.Itoa(i),
			Result: core.Result{Limit: core.PerMinute(100), Allowed: i%4 != 0, Remaining: 12 * i, Degraded: i == 5},
			Shadow: i == 4,
			Cached: i == 0,
		}
	}
	b.Run("sdk", func(b *testing.B) {
		o, reader := newObserver(b)
		decide(b, o, events[:])
		data, _ := collect(b, reader)["ratekit.quota.utilization"].Data.(metricdata.Histogram[float64])
		var recorded uint64
		for _, p := range data.DataPoints {
			recorded += p.Count
		}
		if want := uint64(b.N + len(events)); recorded != want {
			b.Fatalf("%d decisions recorded, want %d", recorded, want)
		}
	})
	b.Run("noop", func(b *testing.B) {
		o, err := otellimit.New(otellimit.WithMeterProvider(noop.NewMeterProvider()))
		if err != nil {
			b.Fatal(err)
		}
		decide(b, o, events[:])
	})
}

// decide tells o of each event once, then of b.N events in turn, from
// every goroutine, timing those.
func decide(b *testing.B, o *otellimit.Observer, events []core.DecisionEvent) {
	ctx := context.Background()
	for _, e := range events {
		o.Decided(ctx, e) // first sightings, outside the measure
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			o.Decided(ctx, events[i%len(events)])
		}
	})
	b.StopTimer()
}

// BenchmarkStoreCalled measures recording a store call, on the
// OpenTelemetry SDK: one that succeeded, and one that failed to connect,
// whose error observe.ErrorKind sorts.
func BenchmarkStoreCalled(b *testing.B) {
	b.Run("ok", func(b *testing.B) { storeCalls(b, nil) })
	b.Run("error", func(b *testing.B) {
		storeCalls(b, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	})
}

func storeCalls(b *testing.B, err error) {
	o, _ := newObserver(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o.StoreCalled(time.Millisecond, err)
		}
	})
}
