package otellimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/otellimit"
)

// An Observer records a Limiter's decisions on a MeterProvider. Here a
// third login attempt in a minute meets a limit of two, and a collection
// tells.
func Example() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	reader := sdkmetric.NewManualReader() // or sdkmetric.NewPeriodicReader(exporter), to push over OTLP
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	observer, err := otellimit.New(otellimit.WithMeterProvider(provider)) // without it, the global provider
	if err != nil {
		log.Fatal(err)
	}
	defer observer.Close()
	limiter, err := core.NewLimiter(store, core.WithObserver(observer))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	login := core.Rule{Name: "login", Limit: core.PerMinute(2), Key: keyfuncs.Static("alice")}
	r := httptest.NewRequest("POST", "/login", nil)
	for attempt := 1; attempt <= 3; attempt++ {
		d, err := limiter.Check(r.Context(), adapter.HTTPRequest(r), []core.Rule{login})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("attempt %d allowed: %t\n", attempt, d.Allowed)
	}
	printSums(reader, "ratekit.decisions", "ratekit.near_limit")
	// Output:
	// attempt 1 allowed: true
	// attempt 2 allowed: true
	// attempt 3 allowed: false
	// ratekit.decisions{degraded=false,outcome=allowed,rule=login} 2
	// ratekit.decisions{degraded=false,outcome=denied,rule=login} 1
	// ratekit.near_limit{rule=login} 1
}

// Two Limiters, one MeterProvider: constant attributes tell their
// breakers apart.
func ExampleWithConstAttributes() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	for _, name := range []string{"public", "internal"} {
		observer, err := otellimit.New(otellimit.WithMeterProvider(provider),
			otellimit.WithConstAttributes(attribute.String("limiter", name)))
		if err != nil {
			log.Fatal(err)
		}
		defer observer.Close()
		if name == "internal" {
			observer.BreakerChanged(core.BreakerClosed, core.BreakerOpen) // as its Limiter would
		}
	}
	printSums(reader, "ratekit.breaker.state")
	// Output:
	// ratekit.breaker.state{limiter=internal,state=open} 1
	// ratekit.breaker.state{limiter=public,state=closed} 1
}

// printSums prints the points of the named counters and gauges that are
// not 0, sorted.
func printSums(reader *sdkmetric.ManualReader, names ...string) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if !slices.Contains(names, m.Name) {
				continue
			}
			var points []metricdata.DataPoint[int64]
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				points = data.DataPoints
			case metricdata.Gauge[int64]:
				points = data.DataPoints
			}
			for _, p := range points {
				if p.Value != 0 {
					lines = append(lines, fmt.Sprintf("%s{%s} %d", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value))
				}
			}
		}
	}
	slices.Sort(lines)
	for _, line := range lines {
		fmt.Println(line)
	}
}
