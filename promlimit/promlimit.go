// Package promlimit exports what a [core.Limiter] does as Prometheus
// metrics. Its [Collector] is both a [core.Observer], given to the Limiter
// with [core.WithObserver], and a [prometheus.Collector], registered with a
// Prometheus registry:
//
//	collector := promlimit.MustNew()
//	prometheus.MustRegister(collector)
//	limiter, err := core.NewLimiter(store, core.WithObserver(collector))
//
// It lives in a package of its own so that core does not depend on
// client_golang.
//
// # Metrics
//
// Every name starts with ratekit_. Label values are bounded: a rule's name,
// a fixed set of outcomes, error kinds and breaker states; never an
// identity, a storage key or a request path, so the number of series does
// not grow with the number of clients.
//
//	ratekit_decisions_total{rule, outcome, degraded}        counter
//	ratekit_near_limit_total{rule}                          counter
//	ratekit_quota_used_ratio{rule}                          histogram
//	ratekit_denied_cache_hits_total{rule}                   counter
//	ratekit_store_duration_seconds{result}                  histogram
//	ratekit_store_errors_total{kind}                        counter
//	ratekit_breaker_state{state}                            gauge
//
// ratekit_decisions_total counts every rule's part of every decision:
// outcome is "allowed", "denied", or "shadow_denied" for a rule in shadow
// mode ([core.Rule.Shadow], [core.WithShadow]) that would have denied the
// request and let it through ([core.DecisionEvent.Verdict]). degraded is
// "true" for decisions made without the shared store, by the failure
// policy (local counting, fail open or fail closed), and "false" otherwise:
// the degraded decisions are the degraded="true" series, and the outcome
// label still tells whether they allowed or denied. A request checked
// against two rules counts once under each.
//
// ratekit_near_limit_total counts allowed decisions that left a client
// with 80% or more of its quota used ([core.Result.Used]; the threshold is
// set by [WithNearLimit]): clients close to their limit, before any is
// denied. ratekit_quota_used_ratio is the distribution of that fraction
// over every decision, denials included (a denial has used all of it), so
// its _count equals the rule's decisions.
//
// ratekit_denied_cache_hits_total counts decisions answered by the Limiter's
// denied-key cache ([core.WithDeniedCache]) without a store call: clients
// hammering past their limit at no cost to Redis.
//
// ratekit_store_duration_seconds times every store call, the circuit
// breaker's probes included, with result "ok" or "error"; a call cut off at
// its deadline counts the deadline. ratekit_store_errors_total counts the
// failed calls by kind ([observe.ErrorKind]): "timeout", "canceled",
// "connection", "redis", "malformed", "closed" or "other". Decisions made
// without a store call (a cache hit, an open breaker) add nothing to either.
//
// ratekit_breaker_state has one series per state of the circuit breaker,
// "closed", "open" and "half-open": 1 for the current state, 0 for the
// others. It starts closed. It follows the breaker of one Limiter: give
// each Limiter its own Collector, told apart by [WithConstLabels].
//
// # Bounds
//
// Rule names come from configuration, but a program may make rules at run
// time. A Collector labels at most 1000 distinct rule names ([WithMaxRules]);
// the decisions of any rule beyond that count under rule="{other}"
// ([OtherRule]), a value no rule name can take.
//
// A rule's series are created when it is first seen, every outcome at once,
// so that rates and ratios over them start from zero rather than from
// nothing; the {other} series are created once the bound is reached.
package promlimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/observe"
)

// OtherRule is the rule label of the decisions of rules beyond the
// [WithMaxRules] bound. Rule names never contain braces, so no rule has
// this name.
const OtherRule = "{other}"

// Defaults of the options.
const (
	// DefaultNearLimit is the fraction of the quota used from which an
	// allowed decision counts as near the limit ([WithNearLimit]).
	DefaultNearLimit = 0.8
	// DefaultMaxRules bounds the distinct rule names labelled
	// ([WithMaxRules]).
	DefaultMaxRules = 1000
)

// DefaultStoreBuckets are the bounds, in seconds, of the store latency
// histogram unless [WithStoreBuckets] says otherwise: from 50 µs (Redis on
// loopback) to 1 s, past the Limiter's default deadline of 50 ms.
var DefaultStoreBuckets = []float64{
	.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1,
}

// DefaultUsedBuckets are the bounds of the quota used histogram unless
// [WithUsedBuckets] says otherwise.
var DefaultUsedBuckets = []float64{.25, .5, .75, .8, .9, .95, 1}

// Outcomes, as the outcome label of ratekit_decisions_total names them.
var outcomes = [...]string{observe.VerdictAllowed, observe.VerdictDenied, observe.VerdictShadowDenied}

// breakerStates are the states of ratekit_breaker_state, in label order.
var breakerStates = [...]core.BreakerState{core.BreakerClosed, core.BreakerOpen, core.BreakerHalfOpen}

// errorKinds are the values of ratekit_store_errors_total's kind label.
var errorKinds = [...]string{
	observe.ErrorKindTimeout, observe.ErrorKindCanceled, observe.ErrorKindConnection, observe.ErrorKindRedis,
	observe.ErrorKindMalformed, observe.ErrorKindClosed, observe.ErrorKindOther,
}

// Collector turns what a [core.Limiter] reports into Prometheus metrics
// (see the package documentation). It is a [core.Observer] and a
// [prometheus.Collector], safe for concurrent use. Decided allocates
// nothing once a rule has been seen, nor does StoreCalled for a call that
// succeeded.
//
// One Collector may observe several Limiters; the counters and histograms
// then add up theirs, but ratekit_breaker_state shows whichever breaker
// changed last. Give each Limiter a Collector of its own, with
// [WithConstLabels] telling them apart, to see every breaker.
type Collector struct {
	nearLimit float64
	maxRules  int

	decisions *prometheus.CounterVec
	near      *prometheus.CounterVec
	used      *prometheus.HistogramVec
	cacheHits *prometheus.CounterVec
	storeDur  *prometheus.HistogramVec
	storeErrs *prometheus.CounterVec
	breaker   *prometheus.Desc

	storeOK, storeFailed prometheus.Observer
	errs                 map[string]prometheus.Counter // by kind; read-only after New

	state atomic.Int32 // core.BreakerState

	// rules maps a rule name to its series. It is copied on write, so
	// Decided reads it without a lock or an allocation.
	rules atomic.Pointer[map[string]*ruleSeries]
	mu    sync.Mutex  // serialises writers of rules and other
	full  atomic.Bool // maxRules names are labelled: the others are other
	other *ruleSeries // created once the bound is reached
}

// ruleSeries are the series of one rule label.
type ruleSeries struct {
	decisions [len(outcomes)][2]prometheus.Counter // by outcome, then degraded
	near      prometheus.Counter
	used      prometheus.Observer
	cacheHits prometheus.Counter
}

// Option configures a [Collector]. Options are sealed: only this package
// makes them.
type Option func(*config) error

type config struct {
	constLabels  prometheus.Labels
	nearLimit    float64
	maxRules     int
	storeBuckets []float64
	usedBuckets  []float64
}

// WithConstLabels adds labels of fixed value to every metric, such as
// {"limiter": "api"} to tell apart the Collectors of several Limiters
// registered on one registry. By default there are none. The names rule,
// outcome, degraded, result, kind and state are taken.
func WithConstLabels(labels prometheus.Labels) Option {
	return func(c *config) error {
		c.constLabels = labels
		return nil
	}
}

// WithNearLimit sets the fraction of the quota used, 0 < t ≤ 1, from which
// an allowed decision counts in ratekit_near_limit_total: 0.8 by default, a
// client left with a fifth of its quota or less. A lower threshold warns
// earlier, and counts more clients that never reach their limit.
func WithNearLimit(t float64) Option {
	return func(c *config) error {
		if !(t > 0 && t <= 1) {
			return fmt.Errorf("promlimit: near-limit threshold %v: want 0 < t ≤ 1", t)
		}
		c.nearLimit = t
		return nil
	}
}

// WithMaxRules bounds the distinct rule names labelled, 1000 by default;
// the decisions of rules beyond the bound count under rule="{other}"
// ([OtherRule]). Each rule name costs nine series (six decision series, the
// near-limit and cache-hit counters, and a histogram), so the bound caps
// what a program that makes rules at run time can cost Prometheus.
func WithMaxRules(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("promlimit: %d rules: want at least 1", n)
		}
		c.maxRules = n
		return nil
	}
}

// WithStoreBuckets sets the upper bounds, in seconds, of the buckets of
// ratekit_store_duration_seconds, in increasing order;
// [DefaultStoreBuckets] by default.
func WithStoreBuckets(bounds ...float64) Option {
	return func(c *config) error {
		if err := checkBuckets(bounds); err != nil {
			return fmt.Errorf("promlimit: store buckets: %w", err)
		}
		c.storeBuckets = bounds
		return nil
	}
}

// WithUsedBuckets sets the upper bounds of the buckets of
// ratekit_quota_used_ratio, fractions in increasing order;
// [DefaultUsedBuckets] by default.
func WithUsedBuckets(bounds ...float64) Option {
	return func(c *config) error {
		if err := checkBuckets(bounds); err != nil {
			return fmt.Errorf("promlimit: used buckets: %w", err)
		}
		c.usedBuckets = bounds
		return nil
	}
}

func checkBuckets(bounds []float64) error {
	if len(bounds) == 0 {
		return errors.New("no bounds")
	}
	for i := 1; i < len(bounds); i++ {
		if !(bounds[i] > bounds[i-1]) {
			return fmt.Errorf("bounds %v are not in increasing order", bounds)
		}
	}
	return nil
}

// New returns a Collector configured by opts. It returns an error for an
// invalid option, such as a threshold out of range or a constant label
// that is not a valid label name or takes one of the Collector's own.
func New(opts ...Option) (*Collector, error) {
	cfg := config{
		nearLimit:    DefaultNearLimit,
		maxRules:     DefaultMaxRules,
		storeBuckets: DefaultStoreBuckets,
		usedBuckets:  DefaultUsedBuckets,
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	c := newCollector(&cfg)
	// Registering on a throwaway registry checks every descriptor now
	// (label names, clashes with the constant labels), not when the caller
	// registers the Collector.
	if err := prometheus.NewPedanticRegistry().Register(c); err != nil {
		return nil, fmt.Errorf("promlimit: %w", err)
	}
	c.storeOK = c.storeDur.WithLabelValues("ok")
	c.storeFailed = c.storeDur.WithLabelValues("error")
	for _, k := range errorKinds {
		c.errs[k] = c.storeErrs.WithLabelValues(k)
	}
	empty := map[string]*ruleSeries{}
	c.rules.Store(&empty)
	return c, nil
}

// newCollector returns a Collector with the metrics cfg describes, not yet
// checked.
func newCollector(cfg *config) *Collector {
	cl := cfg.constLabels
	return &Collector{
		nearLimit: cfg.nearLimit,
		maxRules:  cfg.maxRules,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "ratekit_decisions_total",
			Help:        "Rule decisions by rule, outcome (allowed, denied, shadow_denied) and whether they were made without the shared store (degraded).",
			ConstLabels: cl,
		}, []string{"rule", "outcome", "degraded"}),
		near: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "ratekit_near_limit_total",
			Help:        "Allowed rule decisions that left the quota used at or above the near-limit threshold (0.8 unless configured).",
			ConstLabels: cl,
		}, []string{"rule"}),
		used: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "ratekit_quota_used_ratio",
			Help:        "Fraction of the quota used after each rule decision (1 for a denial).",
			ConstLabels: cl,
			Buckets:     cfg.usedBuckets,
		}, []string{"rule"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "ratekit_denied_cache_hits_total",
			Help:        "Rule decisions answered by the denied-key cache, without a store call.",
			ConstLabels: cl,
		}, []string{"rule"}),
		storeDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "ratekit_store_duration_seconds",
			Help:        "Duration of store calls, breaker probes included, by result (ok, error).",
			ConstLabels: cl,
			Buckets:     cfg.storeBuckets,
		}, []string{"result"}),
		storeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "ratekit_store_errors_total",
			Help:        "Failed store calls by kind of error.",
			ConstLabels: cl,
		}, []string{"kind"}),
		breaker: prometheus.NewDesc("ratekit_breaker_state",
			"State of the circuit breaker in front of the store: 1 for the current state (closed, open, half-open), 0 for the others.",
			[]string{"state"}, cl),
		errs: make(map[string]prometheus.Counter, len(errorKinds)),
	}
}

// MustNew is like [New] but panics on an invalid option.
func MustNew(opts ...Option) *Collector {
	c, err := New(opts...)
	if err != nil {
		panic(err)
	}
	return c
}

// Describe sends the descriptors of every metric of the Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.decisions.Describe(ch)
	c.near.Describe(ch)
	c.used.Describe(ch)
	c.cacheHits.Describe(ch)
	c.storeDur.Describe(ch)
	c.storeErrs.Describe(ch)
	ch <- c.breaker
}

// Collect sends the current value of every series of the Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.decisions.Collect(ch)
	c.near.Collect(ch)
	c.used.Collect(ch)
	c.cacheHits.Collect(ch)
	c.storeDur.Collect(ch)
	c.storeErrs.Collect(ch)
	state := core.BreakerState(c.state.Load())
	for _, s := range breakerStates {
		v := 0.0
		if s == state {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.breaker, prometheus.GaugeValue, v, s.String())
	}
}

// Decided counts one rule's part of a decision.
func (c *Collector) Decided(_ context.Context, e core.DecisionEvent) {
	s := c.series(e.Rule)
	o := 0
	switch observe.Verdict(e) {
	case observe.VerdictDenied:
		o = 1
	case observe.VerdictShadowDenied:
		o = 2
	}
	d := 0
	if e.Degraded {
		d = 1
	}
	s.decisions[o][d].Inc()
	used := observe.Used(e.Result)
	if !e.Allowed {
		used = 1 // a denial has no room left, whatever Remaining says
	}
	s.used.Observe(used)
	if e.Allowed && used >= c.nearLimit {
		s.near.Inc()
	}
	if e.Cached {
		s.cacheHits.Inc()
	}
}

// StoreCalled times one store call and counts its error.
func (c *Collector) StoreCalled(d time.Duration, err error) {
	if err == nil {
		c.storeOK.Observe(d.Seconds())
		return
	}
	c.storeFailed.Observe(d.Seconds())
	e, ok := c.errs[observe.ErrorKind(err)]
	if !ok {
		e = c.errs[observe.ErrorKindOther]
	}
	e.Inc()
}

// BreakerChanged records the circuit breaker's new state.
func (c *Collector) BreakerChanged(_, to core.BreakerState) {
	c.state.Store(int32(to))
}

// series returns the series of the rule named name, creating them on first
// sight, or those of OtherRule beyond the bound.
func (c *Collector) series(name string) *ruleSeries {
	if s, ok := (*c.rules.Load())[name]; ok {
		return s
	}
	if c.full.Load() {
		return c.other
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.rules.Load()
	if s, ok := old[name]; ok {
		return s
	}
	if len(old) >= c.maxRules {
		if c.other == nil {
			c.other = c.newRuleSeries(OtherRule)
		}
		c.full.Store(true) // after c.other is set: readers that see full see it
		return c.other
	}
	s := c.newRuleSeries(name)
	m := make(map[string]*ruleSeries, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = s
	c.rules.Store(&m)
	return s
}

// newRuleSeries creates the series of the rule label name, every outcome
// at zero.
func (c *Collector) newRuleSeries(name string) *ruleSeries {
	// Label values must be UTF-8; a rule name need not be.
	label := strings.ToValidUTF8(name, "\uFFFD")
	s := &ruleSeries{
		near:      c.near.WithLabelValues(label),
		used:      c.used.WithLabelValues(label),
		cacheHits: c.cacheHits.WithLabelValues(label),
	}
	for i, o := range outcomes {
		s.decisions[i][0] = c.decisions.WithLabelValues(label, o, "false")
		s.decisions[i][1] = c.decisions.WithLabelValues(label, o, "true")
	}
	return s
}

var _ core.Observer = (*Collector)(nil)
var _ prometheus.Collector = (*Collector)(nil)
