package otellimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/outbound"
)

// Attribute keys of the outbound instruments.
const (
	keyLimiter = attribute.Key("limiter")
	keyStatus  = attribute.Key("status")
	keyReason  = attribute.Key("reason")
)

// Outbound records what an [outbound.Limiter] and its [outbound.Transport]
// report as OpenTelemetry instruments of the meter [ScopeName]. It is an
// [outbound.Observer]: give it to the Limiter with [outbound.WithObserver].
// Every measurement carries the Limiter's name (limiter), never a key:
//
//	ratekit.outbound.wait            histogram (s)   limiter, outcome, degraded
//	ratekit.outbound.queue           gauge           limiter
//	ratekit.outbound.throttled       counter         limiter, status
//	ratekit.outbound.pauses          counter         limiter, reason
//	ratekit.outbound.paused          counter (s)     limiter, reason
//	ratekit.outbound.rate            gauge ({unit}/s) limiter
//	ratekit.outbound.redis.duration  histogram (s)   limiter, result
//	ratekit.outbound.breaker.state   gauge           limiter, state
//
// Their meaning is that of package promlimit's [promlimit.Outbound].
type Outbound struct {
	consts   []attribute.KeyValue
	waits    metric.Float64Histogram
	queue    metric.Int64Gauge
	refusals metric.Int64Counter
	pauses   metric.Int64Counter
	paused   metric.Float64Counter
	rate     metric.Float64Gauge
	redis    metric.Float64Histogram
	breaker  metric.Int64Gauge
}

// NewOutbound returns an Outbound. It takes [WithMeterProvider],
// [WithConstAttributes] and [WithStoreBuckets] (the buckets of the Redis
// call histogram), and returns an error when the MeterProvider refuses an
// instrument.
func NewOutbound(opts ...Option) (*Outbound, error) {
	cfg := defaultConfig()
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	o := &Outbound{consts: cfg.consts}
	m := cfg.provider.Meter(ScopeName)
	var errs [8]error
	o.waits, errs[0] = m.Float64Histogram("ratekit.outbound.wait", metric.WithUnit("s"),
		metric.WithDescription("Waits for a turn, by limiter, outcome (granted, gave_up, canceled, error) and whether decided without Redis."),
		metric.WithExplicitBucketBoundaries(.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
	o.queue, errs[1] = m.Int64Gauge("ratekit.outbound.queue", metric.WithUnit("{caller}"),
		metric.WithDescription("Callers of this process asleep waiting for their turn."))
	o.refusals, errs[2] = m.Int64Counter("ratekit.outbound.throttled", metric.WithUnit("{answer}"),
		metric.WithDescription("Answers of the upstream refusing a request, by status (429, 503)."))
	o.pauses, errs[3] = m.Int64Counter("ratekit.outbound.pauses", metric.WithUnit("{pause}"),
		metric.WithDescription("Pauses this process set for the whole fleet, by reason."))
	o.paused, errs[4] = m.Float64Counter("ratekit.outbound.paused", metric.WithUnit("s"),
		metric.WithDescription("Time of the pauses this process set for the whole fleet, by reason."))
	o.rate, errs[5] = m.Float64Gauge("ratekit.outbound.rate", metric.WithUnit("{unit}/s"),
		metric.WithDescription("The shared adaptive rate as last seen."))
	o.redis, errs[6] = m.Float64Histogram("ratekit.outbound.redis.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of Redis calls, by result (ok, error)."),
		metric.WithExplicitBucketBoundaries(cfg.storeBuckets...))
	o.breaker, errs[7] = m.Int64Gauge("ratekit.outbound.breaker.state", metric.WithUnit("1"),
		metric.WithDescription("State of the circuit breaker in front of Redis: 1 for the current state, 0 for the others."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("otellimit: %w", err)
	}
	return o, nil
}

// set returns the measurement option of kvs and the constant attributes.
func (o *Outbound) set(kvs ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue(nil), o.consts...), kvs...)...))
}

// Waited records one wait.
func (o *Outbound) Waited(e outbound.WaitEvent) {
	o.waits.Record(context.Background(), e.Wait.Seconds(),
		o.set(keyLimiter.String(e.Limiter), keyOutcome.String(e.Outcome), keyDegraded.Bool(e.Degraded)))
}

// QueueChanged records the queue depth.
func (o *Outbound) QueueChanged(limiter string, depth int) {
	o.queue.Record(context.Background(), int64(depth), o.set(keyLimiter.String(limiter)))
}

// Throttled counts one refusal of the upstream.
func (o *Outbound) Throttled(limiter string, status int) {
	o.refusals.Add(context.Background(), 1, o.set(keyLimiter.String(limiter), keyStatus.Int(status)))
}

// Paused counts one pause.
func (o *Outbound) Paused(limiter string, d time.Duration, reason string) {
	s := o.set(keyLimiter.String(limiter), keyReason.String(reason))
	o.pauses.Add(context.Background(), 1, s)
	o.paused.Add(context.Background(), d.Seconds(), s)
}

// RateChanged records the shared rate.
func (o *Outbound) RateChanged(limiter string, perSecond float64) {
	o.rate.Record(context.Background(), perSecond, o.set(keyLimiter.String(limiter)))
}

// RedisCalled records one Redis call.
func (o *Outbound) RedisCalled(limiter string, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	o.redis.Record(context.Background(), d.Seconds(), o.set(keyLimiter.String(limiter), keyResult.String(result)))
}

// BreakerChanged records the breaker's new state.
func (o *Outbound) BreakerChanged(limiter string, _, to core.BreakerState) {
	for _, s := range breakerStates {
		v := int64(0)
		if s == to {
			v = 1
		}
		o.breaker.Record(context.Background(), v, o.set(keyLimiter.String(limiter), keyState.String(s.String())))
	}
}

var _ outbound.Observer = (*Outbound)(nil)
