package app

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/ratekit/ratekit/otellimit"
)

// DefaultOTelInterval is how often an app run with -otel exports its
// metrics, unless -otel-interval says otherwise.
const DefaultOTelInterval = 10 * time.Second

// otelTelemetry is the OpenTelemetry side of -otel: an otellimit Observer
// for the Limiter, whose meter provider exports every interval.
type otelTelemetry struct {
	observer *otellimit.Observer
	provider *sdkmetric.MeterProvider
	once     sync.Once
}

// newOTel returns the telemetry of -otel: an otellimit Observer on a meter
// provider whose periodic reader writes what it collects to w every
// interval, one JSON object a line, through the stdout exporter.
func newOTel(w io.Writer, interval time.Duration) (*otelTelemetry, error) {
	exporter, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
	if err != nil {
		return nil, err
	}
	reader := sdkmetric.NewPeriodicReader(exporter, sdkmetric.WithInterval(interval))
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	observer, err := otellimit.New(otellimit.WithMeterProvider(provider))
	if err != nil {
		_ = provider.Shutdown(context.Background()) // nothing recorded yet
		return nil, err
	}
	return &otelTelemetry{observer: observer, provider: provider}, nil
}

// shutdown makes the last export, of everything recorded since the one
// before, within [ShutdownTimeout], and stops the reader; a failure goes to
// log. Call it once the Limiter is closed, so that no decision goes
// unexported. Only the first call does anything, and a nil o does
// nothing.
func (o *otelTelemetry) shutdown(log *slog.Logger) {
	if o == nil {
		return
	}
	o.once.Do(func() {
		_ = o.observer.Close() // always nil
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		if err := o.provider.Shutdown(ctx); err != nil {
			log.Error("the last OpenTelemetry export failed", "err", err)
		}
	})
}
