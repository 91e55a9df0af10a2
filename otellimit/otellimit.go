// Package otellimit records what a [core.Limiter] does as OpenTelemetry
// metrics. Its [Observer] is a [core.Observer], given to the Limiter with
// [core.WithObserver], that draws its instruments from a
// [metric.MeterProvider]: the global one ([otel.GetMeterProvider]) unless
// [WithMeterProvider] names another.
//
//	observer, err := otellimit.New(otellimit.WithMeterProvider(provider))
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer observer.Close()
//	limiter, err := core.NewLimiter(store, core.WithObserver(observer))
//
// It measures what package promlimit measures for Prometheus, named after
// OpenTelemetry's conventions, and lives in a package of its own so that
// core does not depend on OpenTelemetry. Use one or the other, or both: a
// Limiter takes several observers.
//
// # Instruments
//
// The instruments belong to the meter named [ScopeName]:
//
//	name                        instrument            unit        attributes
//	ratekit.decisions           Int64Counter          {decision}  rule, outcome, degraded
//	ratekit.near_limit          Int64Counter          {decision}  rule
//	ratekit.quota.utilization   Float64Histogram      1           rule
//	ratekit.denied_cache.hits   Int64Counter          {decision}  rule
//	ratekit.store.duration      Float64Histogram      s           result
//	ratekit.store.errors        Int64Counter          {error}     kind
//	ratekit.breaker.state       Int64ObservableGauge  1           state
//
// ratekit.decisions adds one for each rule a request was checked against:
// a request under two rules adds one to each. Its outcome attribute is
// "allowed", "denied", or "shadow_denied" when a rule in shadow mode
// ([core.Rule.Shadow], [core.WithShadow]) would have denied the request
// and let it pass ([core.DecisionEvent.Verdict]). degraded, a boolean, is
// true when the failure policy decided without the shared store, so an
// outage shows as the degraded streams, still split by outcome.
//
// ratekit.quota.utilization records, for each of those decisions, the
// fraction of the rule's capacity spent once it was made
// ([core.Result.Used]), 1 for any decision that did not allow: a denied
// client has nothing left. Its count is therefore the rule's number of
// decisions. Its buckets are [DefaultUtilizationBuckets] unless
// [WithUtilizationBuckets] says otherwise. ratekit.near_limit counts the
// allowed decisions among them that reached the near-limit threshold, 0.8
// unless [WithNearLimit] says otherwise: clients about to be limited, seen
// before the first denial.
//
// ratekit.denied_cache.hits counts the decisions that the Limiter's
// denied-key cache ([core.WithDeniedCache]) answered without asking the
// store: the load a client retrying past its limit did not put on Redis.
//
// ratekit.store.duration records, in seconds, how long each store call
// took, the circuit breaker's probes included; result is "ok" or "error",
// and a call abandoned at its deadline records the deadline. Its buckets
// are [DefaultStoreBuckets] unless [WithStoreBuckets] says otherwise.
// ratekit.store.errors counts the failed calls by kind, one of the values
// of [observe.ErrorKind]: "timeout", "canceled", "connection", "redis",
// "malformed", "closed" or "other". A decision made with no store call (a
// cache hit, an open breaker) records in neither.
//
// ratekit.breaker.state is observed at each collection: one point for
// each state of the circuit breaker, "closed", "open" and "half-open",
// 1 for the state it is in and 0 for the two others. It is closed until
// the Limiter reports a change. It follows the breaker of one Limiter:
// give each Limiter its own Observer, set apart by [WithConstAttributes].
//
// The attributes of [WithConstAttributes] are added to every measurement.
//
// # Bounds
//
// No attribute carries an identity, a storage key or a request path: each
// takes a value from a fixed set, except rule, which takes the rule's
// name, so the number of streams does not grow with the number of clients.
// Rule names come from configuration, but a program may make rules as it
// runs, so at most [DefaultMaxRules] (300) distinct names are recorded as
// they are ([WithMaxRules]); the rules seen after that are recorded under
// rule="{other}" ([OtherRule]), a name no rule can have. A name that is
// not valid UTF-8 is recorded with its invalid bytes replaced by U+FFFD.
//
// Each rule name makes nine streams: six of ratekit.decisions (three
// outcomes, degraded or not), one each of ratekit.near_limit,
// ratekit.denied_cache.hits and ratekit.quota.utilization. The counters'
// streams start at zero when the rule is first seen, so that rates over
// them have a start. The default bound is below promlimit's 1000 because
// the OpenTelemetry SDK keeps at most 2000 streams per instrument by
// default and folds the rest into one stream marked otel.metric.overflow,
// which loses the rule and the outcome; 300 rules and {other} make 1806
// decision streams. To raise WithMaxRules past 332, raise the SDK's limit
// as well (sdkmetric.WithCardinalityLimit).
//
// # Cost
//
// Decided looks the rule up in a map that is copied when a rule is added,
// so it reads it without a lock, and records with attribute sets built on
// the rule's first sighting: past that, it allocates nothing, nor does
// StoreCalled for a call that succeeded, as far as the MeterProvider's
// instruments allocate nothing either (those of the OpenTelemetry SDK do
// not).
package otellimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/observe"
)

// ScopeName is the name of the meter that holds the instruments: the
// package's import path.
const ScopeName = "github.com/ratekit/ratekit/otellimit"

// OtherRule is the rule attribute of the decisions of the rules seen once
// [WithMaxRules] names have been recorded. No rule is named so: rule
// names cannot contain braces.
const OtherRule = "{other}"

// Defaults of the options.
const (
	// DefaultNearLimit is the fraction of the quota used from which an
	// allowed decision counts in ratekit.near_limit ([WithNearLimit]).
	DefaultNearLimit = 0.8
	// DefaultMaxRules is how many distinct rule names are recorded as
	// they are ([WithMaxRules]).
	DefaultMaxRules = 300
)

// DefaultStoreBuckets are the bucket bounds, in seconds, of
// ratekit.store.duration unless [WithStoreBuckets] sets others. They run
// from 50 µs, a Redis on the same host, to 1 s, well past the Limiter's
// default deadline of 50 ms.
var DefaultStoreBuckets = []float64{
	.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1,
}

// DefaultUtilizationBuckets are the bucket bounds of
// ratekit.quota.utilization unless [WithUtilizationBuckets] sets others:
// finer towards a full quota, where the near-limit threshold lies.
var DefaultUtilizationBuckets = []float64{.25, .5, .75, .8, .9, .95, 1}

// Attribute keys.
const (
	keyRule     = attribute.Key("rule")
	keyOutcome  = attribute.Key("outcome")
	keyDegraded = attribute.Key("degraded")
	keyResult   = attribute.Key("result")
	keyKind     = attribute.Key("kind")
	keyState    = attribute.Key("state")
)

// reservedKeys are the attribute keys of the instruments, which
// [WithConstAttributes] may not take.
var reservedKeys = []attribute.Key{keyRule, keyOutcome, keyDegraded, keyResult, keyKind, keyState}

// outcomes are the values of the outcome attribute.
var outcomes = [...]string{observe.VerdictAllowed, observe.VerdictDenied, observe.VerdictShadowDenied}

// errorKinds are the values of the kind attribute; ErrorKindOther is last,
// and stands for any kind [observe.ErrorKind] may name in the future.
var errorKinds = [...]string{
	observe.ErrorKindTimeout, observe.ErrorKindCanceled, observe.ErrorKindConnection, observe.ErrorKindRedis,
	observe.ErrorKindMalformed, observe.ErrorKindClosed, observe.ErrorKindOther,
}

// breakerStates are the states ratekit.breaker.state reports.
var breakerStates = [...]core.BreakerState{core.BreakerClosed, core.BreakerOpen, core.BreakerHalfOpen}

// Observer records what a [core.Limiter] reports on OpenTelemetry
// instruments (see the package documentation). It is a [core.Observer],
// safe for concurrent use; [New] makes one.
//
// Several Limiters may share one Observer: their counts and durations add
// up, but ratekit.breaker.state shows the breaker that changed last. To
// see each breaker, give each Limiter an Observer of its own, with
// attributes of its own ([WithConstAttributes]).
type Observer struct {
	nearLimit float64
	consts    []attribute.KeyValue

	decisions   metric.Int64Counter
	nearLimits  metric.Int64Counter
	utilization metric.Float64Histogram
	cacheHits   metric.Int64Counter
	storeTime   metric.Float64Histogram
	storeErrors metric.Int64Counter
	breaker     metric.Int64ObservableGauge

	rules *ruleTable[ruleAttrs]

	// Measurement options built by New, read-only after.
	callOK, callFailed []metric.RecordOption
	byKind             [len(errorKinds)][]metric.AddOption
	byState            [len(breakerStates)][]metric.ObserveOption

	state     atomic.Int32 // the breaker's core.BreakerState
	reg       metric.Registration
	closeOnce sync.Once
	closeErr  error
}

// ruleAttrs are the measurement options of one rule attribute.
type ruleAttrs struct {
	decided [len(outcomes)][2][]metric.AddOption // by outcome, then degraded
	count   []metric.AddOption                   // near limit, cache hits
	record  []metric.RecordOption                // utilization
}

// New returns an Observer configured by opts, its instruments created on
// the MeterProvider's meter [ScopeName] and its breaker callback
// registered. It returns an error for an invalid option, or when the
// MeterProvider refuses an instrument or the callback.
func New(opts ...Option) (*Observer, error) {
	cfg := defaultConfig()
	for _, opt := range opts {
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	o := &Observer{nearLimit: cfg.nearLimit, consts: cfg.consts}
	meter := cfg.provider.Meter(ScopeName)
	if err := o.instruments(meter, &cfg); err != nil {
		return nil, fmt.Errorf("otellimit: %w", err)
	}
	o.callOK = []metric.RecordOption{o.attrs(keyResult.String("ok"))}
	o.callFailed = []metric.RecordOption{o.attrs(keyResult.String("error"))}
	for i, kind := range errorKinds {
		o.byKind[i] = []metric.AddOption{o.attrs(keyKind.String(kind))}
	}
	for i, s := range breakerStates {
		o.byState[i] = []metric.ObserveOption{o.attrs(keyState.String(s.String()))}
	}
	o.rules = newRuleTable(cfg.maxRules, o.newRule)
	reg, err := meter.RegisterCallback(o.observeBreaker, o.breaker)
	if err != nil {
		return nil, fmt.Errorf("otellimit: breaker callback: %w", err)
	}
	o.reg = reg
	return o, nil
}

// instruments creates the Observer's instruments on meter.
func (o *Observer) instruments(meter metric.Meter, cfg *config) error {
	var errs [7]error
	o.decisions, errs[0] = meter.Int64Counter("ratekit.decisions",
		metric.WithUnit("{decision}"),
		metric.WithDescription("Rule decisions, by rule, outcome (allowed, denied, shadow_denied) and whether the failure policy made them without the store (degraded)."))
	o.nearLimits, errs[1] = meter.Int64Counter("ratekit.near_limit",
		metric.WithUnit("{decision}"),
		metric.WithDescription("Allowed rule decisions that left the quota used at or above the near-limit threshold."))
	o.utilization, errs[2] = meter.Float64Histogram("ratekit.quota.utilization",
		metric.WithUnit("1"),
		metric.WithDescription("Fraction of the rule's quota used after each decision; 1 for a decision that did not allow."),
		metric.WithExplicitBucketBoundaries(cfg.utilizationBuckets...))
	o.cacheHits, errs[3] = meter.Int64Counter("ratekit.denied_cache.hits",
		metric.WithUnit("{decision}"),
		metric.WithDescription("Rule decisions the denied-key cache answered without a store call."))
	o.storeTime, errs[4] = meter.Float64Histogram("ratekit.store.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Duration of the Limiter's store calls, breaker probes included, by result (ok, error)."),
		metric.WithExplicitBucketBoundaries(cfg.storeBuckets...))
	o.storeErrors, errs[5] = meter.Int64Counter("ratekit.store.errors",
		metric.WithUnit("{error}"),
		metric.WithDescription("Failed store calls, by kind of error."))
	o.breaker, errs[6] = meter.Int64ObservableGauge("ratekit.breaker.state",
		metric.WithUnit("1"),
		metric.WithDescription("State of the circuit breaker in front of the store: 1 for its current state (closed, open, half-open), 0 for the others."))
	return errors.Join(errs[:]...)
}

// attrs returns the measurement option of the attribute set of kvs and
// the constant attributes.
func (o *Observer) attrs(kvs ...attribute.KeyValue) metric.MeasurementOption {
	all := append(slices.Clip(o.consts), kvs...)
	return metric.WithAttributeSet(attribute.NewSet(all...))
}

// newRule returns the measurement options of the rule attribute label,
// and starts its counters' streams at zero.
func (o *Observer) newRule(label string) *ruleAttrs {
	rule := keyRule.String(label)
	per := o.attrs(rule)
	r := &ruleAttrs{count: []metric.AddOption{per}, record: []metric.RecordOption{per}}
	ctx := context.Background()
	for i, outcome := range outcomes {
		for d, degraded := range [2]bool{false, true} {
			r.decided[i][d] = []metric.AddOption{o.attrs(rule, keyOutcome.String(outcome), keyDegraded.Bool(degraded))}
			o.decisions.Add(ctx, 0, r.decided[i][d]...)
		}
	}
	o.nearLimits.Add(ctx, 0, r.count...)
	o.cacheHits.Add(ctx, 0, r.count...)
	return r
}

// Decided records one rule's part of a decision.
func (o *Observer) Decided(ctx context.Context, e core.DecisionEvent) {
	r := o.rules.get(e.Rule)
	degraded := 0
	if e.Degraded {
		degraded = 1
	}
	o.decisions.Add(ctx, 1, r.decided[outcomeIndex(observe.Verdict(e))][degraded]...)
	used := 1.0 // nothing is left to a client that was not allowed
	if e.Allowed {
		used = observe.Used(e.Result)
		if used >= o.nearLimit {
			o.nearLimits.Add(ctx, 1, r.count...)
		}
	}
	o.utilization.Record(ctx, used, r.record...)
	if e.Cached {
		o.cacheHits.Add(ctx, 1, r.count...)
	}
}

// outcomeIndex returns the index of verdict in outcomes.
func outcomeIndex(verdict string) int {
	if i := slices.Index(outcomes[:], verdict); i >= 0 {
		return i
	}
	return 1 // a verdict unknown to this package did not allow
}

// StoreCalled records the duration of one store call and, if it failed,
// the kind of its error.
func (o *Observer) StoreCalled(d time.Duration, err error) {
	ctx := context.Background()
	if err == nil {
		o.storeTime.Record(ctx, d.Seconds(), o.callOK...)
		return
	}
	o.storeTime.Record(ctx, d.Seconds(), o.callFailed...)
	kind := slices.Index(errorKinds[:], observe.ErrorKind(err))
	if kind < 0 {
		kind = len(errorKinds) - 1 // other
	}
	o.storeErrors.Add(ctx, 1, o.byKind[kind]...)
}

// BreakerChanged records the circuit breaker's new state, observed at the
// next collection.
func (o *Observer) BreakerChanged(_, to core.BreakerState) {
	o.state.Store(int32(to))
}

// observeBreaker is the callback of ratekit.breaker.state.
func (o *Observer) observeBreaker(_ context.Context, obs metric.Observer) error {
	current := core.BreakerState(o.state.Load())
	for i, s := range breakerStates {
		var v int64
		if s == current {
			v = 1
		}
		obs.ObserveInt64(o.breaker, v, o.byState[i]...)
	}
	return nil
}

// Close unregisters the callback that observes the breaker, so that
// ratekit.breaker.state no longer reports this Observer and the
// MeterProvider lets go of it. Call it once the Limiter is closed, and
// after the MeterProvider's Shutdown if its last export should still
// report the breaker. The other instruments are the MeterProvider's, and
// stay; measurements made after Close are still recorded. Close returns
// the error of the unregistration, the same on every call.
func (o *Observer) Close() error {
	o.closeOnce.Do(func() { o.closeErr = o.reg.Unregister() })
	return o.closeErr
}

var _ core.Observer = (*Observer)(nil)
