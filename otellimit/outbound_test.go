package otellimit_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/ratekit/ratekit/otellimit"
	"github.com/ratekit/ratekit/outbound"
)

type answer func(*http.Request) (*http.Response, error)

func (f answer) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestOutbound: the outbound instruments after known waits and a 429.
func TestOutbound(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	o, err := otellimit.NewOutbound(otellimit.WithMeterProvider(provider))
	if err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	l, err := outbound.New(rdb, "api", outbound.PerSecond(1000).WithBurst(10), outbound.WithObserver(o))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 3 {
		if err := l.Wait(t.Context(), "k"); err != nil {
			t.Fatal(err)
		}
	}
	tr := &outbound.Transport{Limiter: l, Base: answer(func(r *http.Request) (*http.Response, error) {
		h := http.Header{"Retry-After": {"2"}}
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: http.NoBody, Request: r}, nil
	})}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://upstream.test/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	expect(t, reader, `
		ratekit.outbound.throttled{limiter=api,status=429} 1
		ratekit.outbound.pauses{limiter=api,reason=retry_after} 1
	`, "ratekit.outbound.throttled", "ratekit.outbound.pauses")
	if p := histogram(t, reader, "ratekit.outbound.wait", attribute.String("limiter", "api"), attribute.String("outcome", "granted"), attribute.Bool("degraded", false)); p.Count != 4 {
		t.Errorf("%d waits recorded, want 4", p.Count)
	}
}
