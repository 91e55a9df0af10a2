// Package tracing traces ShouldRateLimit calls with OpenTelemetry, as
// envoyproxy/ratelimit does under TRACING_ENABLED: spans exported over
// OTLP (HTTP or gRPC, as TRACING_EXPORTER_PROTOCOL says; the exporter
// reads the OTEL_EXPORTER_OTLP_* variables), a parent taken from the
// call's W3C traceparent or B3 headers, sampled at TRACING_SAMPLING_RATE
// unless the parent decided. Without TRACING_ENABLED nothing of it runs.
package tracing

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
)

// Tracer traces the calls of one server.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// Start builds the exporter and the tracer provider of set.
func Start(ctx context.Context, set settings.Tracing) (*Tracer, error) {
	var client otlptrace.Client
	switch set.Protocol {
	case "grpc":
		client = otlptracegrpc.NewClient()
	default:
		client = otlptracehttp.NewClient()
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("TRACING_ENABLED: %w", err)
	}
	id := set.ServiceInstanceID
	if id == "" {
		id = rand.Text()
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", set.ServiceName),
		attribute.String("service.namespace", set.ServiceNamespace),
		attribute.String("service.instance.id", id),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(set.SamplingRate))),
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	)
	return &Tracer{
		tp:     tp,
		tracer: tp.Tracer("github.com/ratekit/ratekit/cmd/ratekit-server"),
		prop:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, b3.New(), propagation.Baggage{}),
	}, nil
}

// Shutdown exports the spans still held and stops.
func (t *Tracer) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

// Unary returns the interceptor that traces each ShouldRateLimit call:
// a span whose parent is the incoming metadata's, with the domain, the
// decision (the overall code) and the call's time in milliseconds.
func (t *Tracer) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		r, ok := req.(*rlspb.RateLimitRequest)
		if !ok {
			return handler(ctx, req)
		}
		md, _ := metadata.FromIncomingContext(ctx)
		ctx = t.prop.Extract(ctx, carrier(md))
		ctx, span := t.tracer.Start(ctx, "ShouldRateLimit", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("rpc.method", info.FullMethod), attribute.String("ratelimit.domain", r.GetDomain()),
				attribute.Int("ratelimit.descriptors", len(r.GetDescriptors()))))
		defer span.End()
		start := time.Now()
		resp, err := handler(ctx, req)
		span.SetAttributes(attribute.Float64("ratelimit.decision_ms", float64(time.Since(start).Microseconds())/1000))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			return resp, err
		}
		if out, ok := resp.(*rlspb.RateLimitResponse); ok {
			span.SetAttributes(attribute.String("ratelimit.decision", out.GetOverallCode().String()))
		}
		return resp, nil
	}
}

// carrier reads gRPC metadata as a TextMapCarrier.
type carrier metadata.MD

func (c carrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c carrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c carrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}
