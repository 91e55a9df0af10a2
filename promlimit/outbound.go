package promlimit

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/outbound"
)

// DefaultWaitBuckets are the bounds, in seconds, of the wait histogram of
// an [Outbound]: from a millisecond to a minute.
var DefaultWaitBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Outbound turns what an [outbound.Limiter] and its [outbound.Transport]
// report into Prometheus metrics. It is an [outbound.Observer], given to
// the Limiter with [outbound.WithObserver], and a [prometheus.Collector].
// Every series is labelled by the Limiter's name (limiter), never by a key:
//
//	ratekit_outbound_wait_seconds{limiter, outcome, degraded}   histogram
//	ratekit_outbound_queue_depth{limiter}                       gauge
//	ratekit_outbound_throttled_total{limiter, status}           counter
//	ratekit_outbound_pauses_total{limiter, reason}              counter
//	ratekit_outbound_paused_seconds_total{limiter, reason}      counter
//	ratekit_outbound_rate{limiter}                              gauge
//	ratekit_outbound_redis_duration_seconds{limiter, result}    histogram
//	ratekit_outbound_breaker_state{limiter, state}              gauge
//
// ratekit_outbound_wait_seconds times every wait for a turn, by outcome
// (granted, gave_up, canceled, error) and whether the process's share
// decided it without Redis (degraded). ratekit_outbound_queue_depth counts
// the callers asleep waiting for their turn in this process.
// ratekit_outbound_throttled_total counts the upstream's 429 and 503
// answers; ratekit_outbound_pauses_total and _paused_seconds_total the
// pauses this process set for the fleet, by reason (retry_after, quota,
// default, caller). ratekit_outbound_rate is the shared rate in units per
// second as last seen, with adaptation on (outbound.WithAIMD). The breaker
// gauge is 1 for the current state, 0 for the others.
type Outbound struct {
	waits    *prometheus.HistogramVec
	queue    *prometheus.GaugeVec
	refusals *prometheus.CounterVec
	pauses   *prometheus.CounterVec
	paused   *prometheus.CounterVec
	rate     *prometheus.GaugeVec
	redis    *prometheus.HistogramVec
	breaker  *prometheus.GaugeVec
}

// NewOutbound returns an Outbound collector. It takes [WithConstLabels] and
// [WithStoreBuckets] (the buckets of the Redis call histogram); other
// options are an error.
func NewOutbound(opts ...Option) (*Outbound, error) {
	cfg := config{storeBuckets: DefaultStoreBuckets}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.nearLimit != 0 || cfg.maxRules != 0 || cfg.usedBuckets != nil {
		return nil, fmt.Errorf("promlimit: NewOutbound takes WithConstLabels and WithStoreBuckets only")
	}
	cl := cfg.constLabels
	c := &Outbound{
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ratekit_outbound_wait_seconds",
			Help: "Waits for a turn, by limiter, outcome (granted, gave_up, canceled, error) and whether decided without Redis.", ConstLabels: cl, Buckets: DefaultWaitBuckets},
			[]string{"limiter", "outcome", "degraded"}),
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ratekit_outbound_queue_depth",
			Help: "Callers of this process asleep waiting for their turn.", ConstLabels: cl}, []string{"limiter"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratekit_outbound_throttled_total",
			Help: "Answers of the upstream refusing a request, by status (429, 503).", ConstLabels: cl}, []string{"limiter", "status"}),
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratekit_outbound_pauses_total",
			Help: "Pauses this process set for the whole fleet, by reason.", ConstLabels: cl}, []string{"limiter", "reason"}),
		paused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratekit_outbound_paused_seconds_total",
			Help: "Seconds of the pauses this process set for the whole fleet, by reason.", ConstLabels: cl}, []string{"limiter", "reason"}),
		rate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ratekit_outbound_rate",
			Help: "The shared adaptive rate as last seen, units per second.", ConstLabels: cl}, []string{"limiter"}),
		redis: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ratekit_outbound_redis_duration_seconds",
			Help: "Duration of Redis calls, by result (ok, error).", ConstLabels: cl, Buckets: cfg.storeBuckets}, []string{"limiter", "result"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ratekit_outbound_breaker_state",
			Help: "State of the circuit breaker in front of Redis: 1 for the current state, 0 for the others.", ConstLabels: cl}, []string{"limiter", "state"}),
	}
	if err := prometheus.NewPedanticRegistry().Register(c); err != nil {
		return nil, fmt.Errorf("promlimit: %w", err)
	}
	return c, nil
}

func (c *Outbound) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.waits, c.queue, c.refusals, c.pauses, c.paused, c.rate, c.redis, c.breaker}
}

// Describe sends the descriptors of every metric.
func (c *Outbound) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.collectors() {
		m.Describe(ch)
	}
}

// Collect sends the current value of every series.
func (c *Outbound) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.collectors() {
		m.Collect(ch)
	}
}

// Waited times one wait.
func (c *Outbound) Waited(e outbound.WaitEvent) {
	c.waits.WithLabelValues(e.Limiter, e.Outcome, strconv.FormatBool(e.Degraded)).Observe(e.Wait.Seconds())
}

// QueueChanged sets the queue depth.
func (c *Outbound) QueueChanged(limiter string, depth int) {
	c.queue.WithLabelValues(limiter).Set(float64(depth))
}

// Throttled counts one refusal of the upstream.
func (c *Outbound) Throttled(limiter string, status int) {
	c.refusals.WithLabelValues(limiter, strconv.Itoa(status)).Inc()
}

// Paused counts one pause.
func (c *Outbound) Paused(limiter string, d time.Duration, reason string) {
	c.pauses.WithLabelValues(limiter, reason).Inc()
	c.paused.WithLabelValues(limiter, reason).Add(d.Seconds())
}

// RateChanged sets the shared rate.
func (c *Outbound) RateChanged(limiter string, perSecond float64) {
	c.rate.WithLabelValues(limiter).Set(perSecond)
}

// RedisCalled times one Redis call.
func (c *Outbound) RedisCalled(limiter string, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	c.redis.WithLabelValues(limiter, result).Observe(d.Seconds())
}

// BreakerChanged records the breaker's new state.
func (c *Outbound) BreakerChanged(limiter string, _, to core.BreakerState) {
	for _, s := range breakerStates {
		v := 0.0
		if s == to {
			v = 1
		}
		c.breaker.WithLabelValues(limiter, s.String()).Set(v)
	}
}

var _ outbound.Observer = (*Outbound)(nil)
var _ prometheus.Collector = (*Outbound)(nil)
