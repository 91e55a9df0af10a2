package otellimit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Option configures an [Observer]. Options are sealed: only this package
// makes them.
type Option func(*config) error

type config struct {
	provider           metric.MeterProvider
	consts             []attribute.KeyValue
	nearLimit          float64
	maxRules           int
	storeBuckets       []float64
	utilizationBuckets []float64
}

func defaultConfig() config {
	return config{
		provider:           otel.GetMeterProvider(),
		nearLimit:          DefaultNearLimit,
		maxRules:           DefaultMaxRules,
		storeBuckets:       slices.Clone(DefaultStoreBuckets),
		utilizationBuckets: slices.Clone(DefaultUtilizationBuckets),
	}
}

// WithMeterProvider sets the MeterProvider the instruments come from. By
// default it is the global one, [otel.GetMeterProvider] at the time of
// [New]; until the program sets it with otel.SetMeterProvider, the global
// MeterProvider records nothing, and once it is set, the instruments made
// before forward to it.
func WithMeterProvider(provider metric.MeterProvider) Option {
	return func(c *config) error {
		if provider == nil {
			return errors.New("otellimit: nil MeterProvider")
		}
		c.provider = provider
		return nil
	}
}

// WithConstAttributes adds attributes of fixed value to every measurement,
// such as attribute.String("limiter", "api") to set apart the Observers of
// several Limiters on one MeterProvider. There are none by default. Keys
// must be non-empty and distinct, and string values valid UTF-8; the keys
// rule, outcome, degraded, result, kind and state are the instruments'
// own. Each distinct set of constant attributes makes streams of its own.
func WithConstAttributes(kvs ...attribute.KeyValue) Option {
	return func(c *config) error {
		for i, kv := range kvs {
			if err := checkConst(kv); err != nil {
				return err
			}
			if slices.ContainsFunc(kvs[:i], func(prev attribute.KeyValue) bool { return prev.Key == kv.Key }) {
				return fmt.Errorf("otellimit: constant attribute %q given twice", kv.Key)
			}
		}
		c.consts = slices.Clone(kvs)
		return nil
	}
}

// checkConst returns an error if kv cannot be a constant attribute.
func checkConst(kv attribute.KeyValue) error {
	switch {
	case !kv.Valid():
		return errors.New("otellimit: constant attribute with an empty key")
	case !utf8.ValidString(string(kv.Key)):
		return fmt.Errorf("otellimit: constant attribute %q: key is not UTF-8", kv.Key)
	case slices.Contains(reservedKeys, kv.Key):
		return fmt.Errorf("otellimit: constant attribute %q: the instruments' own", kv.Key)
	case kv.Value.Type() == attribute.STRING && !utf8.ValidString(kv.Value.AsString()):
		return fmt.Errorf("otellimit: constant attribute %q: value is not UTF-8", kv.Key)
	}
	return nil
}

// WithNearLimit sets the fraction of the quota used, 0 < t ≤ 1, from which
// an allowed decision counts in ratekit.near_limit. It is
// [DefaultNearLimit], 0.8, by default: a client left a fifth of its quota
// or less. A lower threshold gives more warning and counts more clients
// that never reach their limit.
func WithNearLimit(t float64) Option {
	return func(c *config) error {
		if math.IsNaN(t) || t <= 0 || t > 1 {
			return fmt.Errorf("otellimit: near-limit threshold %v is not in (0, 1]", t)
		}
		c.nearLimit = t
		return nil
	}
}

// WithMaxRules sets how many distinct rule names are recorded as they are,
// n ≥ 1; rules seen after that are recorded under rule="{other}"
// ([OtherRule]). It is [DefaultMaxRules], 300, by default. Each name makes
// nine streams, six of them on ratekit.decisions: past 332 names, raise
// the SDK's cardinality limit too (see the package documentation).
func WithMaxRules(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("otellimit: at most %d rules: want 1 or more", n)
		}
		c.maxRules = n
		return nil
	}
}

// WithStoreBuckets sets the bucket bounds of ratekit.store.duration, in
// seconds, strictly increasing; [DefaultStoreBuckets] by default. A View
// of the MeterProvider may override them.
func WithStoreBuckets(bounds ...float64) Option {
	return buckets("store", bounds, func(c *config) *[]float64 { return &c.storeBuckets })
}

// WithUtilizationBuckets sets the bucket bounds of
// ratekit.quota.utilization, fractions strictly increasing;
// [DefaultUtilizationBuckets] by default. A View of the MeterProvider may
// override them.
func WithUtilizationBuckets(bounds ...float64) Option {
	return buckets("utilization", bounds, func(c *config) *[]float64 { return &c.utilizationBuckets })
}

// buckets returns the option that sets the bounds of the histogram what,
// in the field field returns, once it has checked that they are finite and
// strictly increasing.
func buckets(what string, bounds []float64, field func(*config) *[]float64) Option {
	return func(c *config) error {
		if len(bounds) == 0 {
			return fmt.Errorf("otellimit: %s buckets: none given", what)
		}
		for i, b := range bounds {
			if math.IsNaN(b) || math.IsInf(b, 0) {
				return fmt.Errorf("otellimit: %s buckets: bound %v is not a finite number", what, b)
			}
			if i > 0 && b <= bounds[i-1] {
				return fmt.Errorf("otellimit: %s buckets: %v after %v: want strictly increasing bounds", what, b, bounds[i-1])
			}
		}
		*field(c) = slices.Clone(bounds)
		return nil
	}
}
