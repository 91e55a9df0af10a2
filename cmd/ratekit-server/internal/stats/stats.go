// Package stats keeps envoyproxy/ratelimit's statistics under envoy's
// names (ratelimit.service.rate_limit.DOMAIN.KEY_VALUE.STAT and the
// service's counters), and exports them as envoy does: to Prometheus under
// the series names of envoy's default statsd mapping, so that dashboards
// keep working, or to a statsd server.
package stats

import (
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Counter is a monotonic counter.
type Counter struct{ v atomic.Uint64 }

// Add adds n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Inc adds 1.
func (c *Counter) Inc() { c.v.Add(1) }

// Value returns the count.
func (c *Counter) Value() uint64 { return c.v.Load() }

// Rule holds the counters of one descriptor's statistics key, as envoy
// names them.
type Rule struct {
	// Key is the descriptor's key (domain.key_value...), sanitized as
	// envoy sanitizes stat names.
	Key                     string
	TotalHits               Counter
	OverLimit               Counter
	NearLimit               Counter
	OverLimitWithLocalCache Counter
	WithinLimit             Counter
	ShadowMode              Counter
}

// counters lists a rule's counters with the suffix of their stat name.
func (r *Rule) counters() [6]named {
	return [6]named{
		{"total_hits", &r.TotalHits}, {"over_limit", &r.OverLimit}, {"near_limit", &r.NearLimit},
		{"over_limit_with_local_cache", &r.OverLimitWithLocalCache}, {"within_limit", &r.WithinLimit},
		{"shadow_mode", &r.ShadowMode},
	}
}

type named struct {
	suffix string
	c      *Counter
}

// MaxKeys bounds the distinct statistics keys kept: detailed_metric and
// value_to_metric name a key per descriptor value a client sends. The
// statistics of further keys count under the domain's OverflowKey.
const MaxKeys = 10_000

// OverflowKey is the key, after the domain, of statistics beyond MaxKeys.
const OverflowKey = "_overflow_"

// Stats holds every statistic of one server.
type Stats struct {
	mu    sync.Mutex
	rules sync.Map // descriptor key → *Rule
	nkeys int      // guarded by mu

	ConfigLoadSuccess Counter
	ConfigLoadError   Counter
	GlobalShadowMode  Counter
	ServiceError      Counter // should_rate_limit.service_error
	RedisError        Counter // should_rate_limit.redis_error
	TotalRequests     Counter // ShouldRateLimit calls over gRPC
	responseTime      histogram
}

// New returns empty statistics.
func New() *Stats {
	s := &Stats{}
	s.responseTime.init(defBuckets)
	return s
}

// Rule returns the counters of the descriptor key (envoy's FullKey, or its
// detailed form), creating them on first use.
func (s *Stats) Rule(key string) *Rule {
	if r, ok := s.rules.Load(key); ok {
		return r.(*Rule)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.rules.Load(key); ok {
		return r.(*Rule)
	}
	name := key
	if s.nkeys >= MaxKeys {
		domain, _, _ := strings.Cut(key, ".")
		name = domain + "." + OverflowKey
		if r, ok := s.rules.Load(name); ok {
			return r.(*Rule)
		}
	}
	r := &Rule{Key: Sanitize(name)}
	s.rules.Store(name, r)
	s.nkeys++
	return r
}

// ObserveResponse records the time one ShouldRateLimit call took.
func (s *Stats) ObserveResponse(d time.Duration) { s.responseTime.observe(d.Seconds()) }

// each calls f with every rule's counters, in no order.
func (s *Stats) each(f func(*Rule)) {
	s.rules.Range(func(_, v any) bool {
		f(v.(*Rule))
		return true
	})
}

var ipv4 = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

var sanitizer = strings.NewReplacer(":", "_", "|", "_")

// Sanitize makes s a stat name as envoy does: ':' and '|' become '_', and
// so do the dots of IPv4 addresses.
func Sanitize(s string) string {
	return ipv4.ReplaceAllStringFunc(sanitizer.Replace(s), func(ip string) string {
		return strings.ReplaceAll(ip, ".", "_")
	})
}

// histogram is a Prometheus-style histogram with fixed bounds.
type histogram struct {
	bounds []float64
	counts []atomic.Uint64 // per bound, then +Inf
	sumMu  sync.Mutex
	sum    float64
}

var defBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func (h *histogram) init(bounds []float64) {
	h.bounds = bounds
	h.counts = make([]atomic.Uint64, len(bounds)+1)
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumMu.Lock()
	h.sum += v
	h.sumMu.Unlock()
}
