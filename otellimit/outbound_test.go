package otellimit_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/ratekit/ratekit/internal/outboundkit"
	"github.com/ratekit/ratekit/otellimit"
)

// TestOutbound: the outbound instruments after known waits and a 429.
func TestOutbound(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	o, err := otellimit.NewOutbound(otellimit.WithMeterProvider(provider))
	if err != nil {
		t.Fatal(err)
	}
	outboundkit.OutboundTraffic(t, o)
	expect(t, reader, `
		ratekit.outbound.throttled{limiter=api,status=429} 1
		ratekit.outbound.pauses{limiter=api,reason=retry_after} 1
	`, "ratekit.outbound.throttled", "ratekit.outbound.pauses")
	if p := histogram(t, reader, "ratekit.outbound.wait", attribute.String("limiter", "api"), attribute.String("outcome", "granted"), attribute.Bool("degraded", false)); p.Count != 4 {
		t.Errorf("%d waits recorded, want 4", p.Count)
	}
}
