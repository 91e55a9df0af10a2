package examples_test

// Snippets of docs/metrics.md, checked like those of snippets_test.go.

import (
	"log"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/otellimit"
)

// OpenTelemetry metrics of a Limiter.
func Example_openTelemetry() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	// snippet:otel
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
	// snippet:end
	defer limiter.Close()
}
