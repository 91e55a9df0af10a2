// Package stats keeps envoyproxy/ratelimit's statistics under envoy's
// names (ratelimit.service.rate_limit.DOMAIN.KEY_VALUE.STAT and the
// service's counters), and exports them as envoy does: to Prometheus under
// the series names of envoy's default statsd mapping, so that dashboards
// keep working, or to a statsd server.
package stats

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
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
	// envoy sanitizes stat names, and at most MaxKeyLen bytes long.
	Key                     string
	TotalHits               Counter
	OverLimit               Counter
	NearLimit               Counter
	OverLimitWithLocalCache Counter
	WithinLimit             Counter
	ShadowMode              Counter

	kind    Kind
	name    string       // the key in the table
	hit     atomic.Int64 // the clock's second of the last hit
	flushed [6]uint64    // the counters as the Flusher last sent them; its own
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

// Kind tells where a statistics key comes from, which decides its budget.
type Kind uint8

const (
	// Configured is a rule's key as the configuration names it (envoy's
	// FullKey): the files bound how many there are. They are never
	// evicted, and always have room.
	Configured Kind = iota
	// Values is a key named by the values of a request's descriptor
	// (detailed_metric, value_to_metric): at most MaxKeys of them and
	// MaxKeyBytes of their keys.
	Values
	// Caller is the key of a descriptor that brings its own limit
	// (config.OverrideStatsKey): at most MaxCallerKeys of them and
	// MaxCallerKeyBytes of their keys, apart from the others, so that
	// callers cannot take the room of the configured rules' keys.
	Caller
	kinds
)

// Bounds of the statistics kept. A client sending distinct values makes
// a key each: the keys of the Values and Caller kinds count against a
// budget of their own, each key at most MaxKeyLen bytes long, and are
// dropped once not hit for IdleAfter, so that new keys find room again.
// The statistics of a key that finds no room count under the domain's
// OverflowKey.
const (
	// MaxKeyLen bounds a key's length in bytes: a longer one keeps its
	// first bytes and ends in '#' and 16 hex digits of the SHA-256 of
	// the whole key, so that distinct keys stay apart.
	MaxKeyLen = 200
	// MaxKeys and MaxKeyBytes bound the keys named by values.
	MaxKeys     = 10_000
	MaxKeyBytes = 1 << 20
	// MaxCallerKeys and MaxCallerKeyBytes bound the keys of descriptors
	// that bring their own limit.
	MaxCallerKeys     = 1_000
	MaxCallerKeyBytes = 64 << 10
	// IdleAfter is how long a key of the Values or Caller kind is kept
	// without a hit. It is far above any statsd flush interval, so that
	// a key's last hits are sent before it goes.
	IdleAfter = 10 * time.Minute
)

// sweepEvery is the least time between two sweeps of idle keys, which a
// full budget starts.
const sweepEvery = time.Second

// OverflowKey is the key, after the domain, of statistics beyond the
// bounds.
const OverflowKey = "_overflow_"

// budget is what one kind of key may hold.
type budget struct{ keys, bytes int }

var budgets = [kinds]budget{
	Values: {MaxKeys, MaxKeyBytes},
	Caller: {MaxCallerKeys, MaxCallerKeyBytes},
}

// Stats holds every statistic of one server.
type Stats struct {
	mu        sync.Mutex
	rules     sync.Map      // bounded key → *Rule
	used      [kinds]budget // keys and bytes held per kind; guarded by mu
	lastSweep int64         // the clock's second; guarded by mu
	now       func() time.Time

	ConfigLoadSuccess Counter
	ConfigLoadError   Counter
	GlobalShadowMode  Counter
	ServiceError      Counter // should_rate_limit.service_error
	RedisError        Counter // should_rate_limit.redis_error
	TotalRequests     Counter // ShouldRateLimit calls over gRPC
	// RedisReadOnly counts the READONLY replies of Redis (a master
	// demoted under the server): redis_pool.readonly_error.
	RedisReadOnly Counter
	responseTime  histogram
	// responseUnit is what ObserveResponse records: a second, or a
	// millisecond
	responseUnit time.Duration
}

// Option tunes Stats.
type Option func(*Stats)

// ResponseTimeInMilliseconds makes the response time histogram observe
// milliseconds, as envoy's PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS does:
// its name (ratelimit_service_response_time_seconds) and buckets stay.
func ResponseTimeInMilliseconds() Option {
	return func(s *Stats) { s.responseUnit = time.Millisecond }
}

// New returns empty statistics.
func New(opts ...Option) *Stats { return NewWithClock(time.Now, opts...) }

// NewWithClock returns empty statistics whose keys age by now.
func NewWithClock(now func() time.Time, opts ...Option) *Stats {
	s := &Stats{now: now, responseUnit: time.Second}
	for _, o := range opts {
		o(s)
	}
	s.responseTime.init(defBuckets)
	return s
}

// Rule returns the counters of a configured rule's key (envoy's
// FullKey), creating them on first use.
func (s *Stats) Rule(key string) *Rule { return s.Key(Configured, key) }

// Key returns the counters of the descriptor key of kind (envoy's
// FullKey, or its detailed form), creating them on first use; past the
// budget of kind, those of the domain's OverflowKey.
func (s *Stats) Key(kind Kind, key string) *Rule {
	key = Bound(key)
	now := s.now().Unix()
	if r, ok := s.rules.Load(key); ok {
		return touch(r.(*Rule), now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.rules.Load(key); ok {
		return touch(r.(*Rule), now)
	}
	if kind != Configured && !s.fits(kind, len(key), now) {
		domain, _, _ := strings.Cut(key, ".")
		key, kind = domain+"."+OverflowKey, Configured
		if r, ok := s.rules.Load(key); ok {
			return touch(r.(*Rule), now)
		}
	}
	r := &Rule{Key: Sanitize(key), kind: kind, name: key}
	r.hit.Store(now)
	s.rules.Store(key, r)
	s.used[kind].keys++
	s.used[kind].bytes += len(key)
	return r
}

func touch(r *Rule, now int64) *Rule {
	if r.hit.Load() != now {
		r.hit.Store(now)
	}
	return r
}

// fits reports whether a key of n bytes of kind has room, after a sweep
// of idle keys when it has none. s.mu is held.
func (s *Stats) fits(kind Kind, n int, now int64) bool {
	b, u := budgets[kind], &s.used[kind]
	if u.keys < b.keys && u.bytes+n <= b.bytes {
		return true
	}
	if now-s.lastSweep < int64(sweepEvery/time.Second) {
		return false
	}
	s.lastSweep = now
	s.sweep(now)
	return u.keys < b.keys && u.bytes+n <= b.bytes
}

// sweep drops the keys of the budgeted kinds not hit for IdleAfter. s.mu
// is held. A hit that looked its key up just before the sweep dropped it
// counts in the dropped counters: after IdleAfter without a hit, that is
// at most the hits of the same second.
func (s *Stats) sweep(now int64) {
	idle := int64(IdleAfter / time.Second)
	s.rules.Range(func(k, v any) bool {
		r := v.(*Rule)
		if r.kind != Configured && now-r.hit.Load() >= idle {
			s.rules.Delete(k)
			s.used[r.kind].keys--
			s.used[r.kind].bytes -= len(r.name)
		}
		return true
	})
}

// Held returns how many keys of kind are kept, and their bytes.
func (s *Stats) Held(kind Kind) (keys, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kind == Configured {
		s.rules.Range(func(_, v any) bool {
			if r := v.(*Rule); r.kind == Configured {
				keys++
				bytes += len(r.name)
			}
			return true
		})
		return keys, bytes
	}
	return s.used[kind].keys, s.used[kind].bytes
}

// Bound returns key cut to MaxKeyLen bytes: a longer key keeps its first
// bytes, up to a UTF-8 boundary, then '#' and 16 hex digits of the
// SHA-256 of the whole key.
func Bound(key string) string {
	if len(key) <= MaxKeyLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	cut := MaxKeyLen - 17
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return key[:cut] + "#" + hex.EncodeToString(sum[:8])
}

// ObserveResponse records the time one ShouldRateLimit call took.
func (s *Stats) ObserveResponse(d time.Duration) {
	s.responseTime.observe(float64(d) / float64(s.responseUnit))
}

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
