package core

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ratekit/ratekit/internal/storekey"
)

// Option configures a [Limiter] or a store. One option type serves every
// constructor of this package: each takes the options meant for what it
// builds and returns an error for any other, and for a bad value, so a
// misconfiguration fails at start-up and never at request time.
type Option func(*config) error

// target is what a constructor builds, for the options to check that they
// apply to it.
type target uint8

const (
	forLimiter target = 1 << iota
	forMemory
	forRedis
	forLeasing
)

func (t target) String() string {
	switch t {
	case forLimiter:
		return "Limiter"
	case forMemory:
		return "MemoryStore"
	case forRedis:
		return "RedisStore"
	case forLeasing:
		return "LeasingStore"
	}
	return "store"
}

// config collects what options set; each constructor reads its own part.
type config struct {
	target target
	clock  func() time.Time // nil: time.Now

	lim *Limiter // the Limiter under construction, when target is forLimiter

	maxKeys int // MemoryStore

	batching   *Batching // RedisStore: WithBatching's; nil for the defaults
	noBatching bool      // RedisStore: WithoutBatching

	leaseSize int // LeasingStore; 0 for LeaseSize's default
	leaseHold time.Duration
}

// newConfig applies opts for the constructor of t.
func newConfig(t target, lim *Limiter, opts []Option) (*config, error) {
	c := &config{target: t, lim: lim}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("ratekit: New%s: nil option", t)
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// now returns the configured clock, or time.Now.
func (c *config) now() func() time.Time {
	if c.clock != nil {
		return c.clock
	}
	return time.Now
}

// only returns an error unless the option named name applies to what c
// builds.
func (c *config) only(name string, t target) error {
	if c.target&t == 0 {
		return fmt.Errorf("ratekit: %s does not configure a %s", name, c.target)
	}
	return nil
}

// limiter returns the Limiter that the option named name configures, or an
// error when c builds something else.
func (c *config) limiter(name string) (*Limiter, error) {
	if err := c.only(name, forLimiter); err != nil {
		return nil, err
	}
	return c.lim, nil
}

// WithClock makes a [Limiter], [MemoryStore] or [LeasingStore] read time
// from now instead of [time.Now]: tests step time by hand with it. A
// Limiter reads it for its circuit breaker's and denied-key cache's
// timing, and passes it to its fallback store; a [RedisStore] reads
// Redis's clock, never the caller's, and takes no clock.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if err := c.only("WithClock", forLimiter|forMemory|forLeasing); err != nil {
			return err
		}
		if now == nil {
			return errors.New("ratekit: WithClock: nil clock")
		}
		c.clock = now
		return nil
	}
}

// WithMaxKeys bounds how many keys a [MemoryStore] keeps, 1<<20 by
// default; n must be positive. When a new key would exceed it, the least
// recently used keys are dropped first: their identities start afresh, so
// the bound trades exactness for memory only under a flood of distinct
// identities.
func WithMaxKeys(n int) Option {
	return func(c *config) error {
		if err := c.only("WithMaxKeys", forMemory); err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("ratekit: WithMaxKeys(%d): want at least 1", n)
		}
		c.maxKeys = n
		return nil
	}
}

// Batching configures how a [RedisStore] coalesces concurrent calls into
// pipelines ([WithBatching]), which it does by default over a
// *redis.Client as a zero Batching does. A zero field takes its default.
type Batching struct {
	// MaxBatch is the most calls one pipeline carries: 128 by default, at
	// most 1024.
	MaxBatch int
	// Parallel is the most pipelines in flight at once: 4 by default, at
	// most 64.
	Parallel int
	// MaxWait holds each pipeline open up to that long for more calls,
	// trading latency for fewer round trips; 0 (the default) sends at once.
	MaxWait time.Duration
}

// Batching bounds.
const (
	defaultMaxBatch = 128
	maxMaxBatch     = 1024
	defaultParallel = 4
	maxParallel     = 64
)

// WithBatching configures how a [RedisStore] coalesces concurrent
// decisions of one process into pipelined round trips, which it does by
// default over a *redis.Client as with a zero Batching ([WithoutBatching]
// turns it off; over a Cluster or Ring client it is off unless asked
// for, see [NewRedisStore]): calls
// that arrive while a pipeline is in flight share the next one, up to
// b.MaxBatch calls a pipeline and b.Parallel pipelines in flight at once.
// A lone caller goes out at once, on its own goroutine, so batching adds
// no wait of its own unless b.MaxWait asks for one.
//
// One-key GCRA calls of one limit that share a pipeline are decided by one
// script call, in the order they queued, as if each had run alone at the
// same instant: Redis then reads its clock once, reads all their keys with
// one MGET and writes each key once. Through a *redis.Client (one server,
// or a Sentinel-watched master) any keys share a script call; through a
// Cluster or Ring client, only keys with one hash tag (one identity's keys)
// do. Other calls go in the pipeline one command each.
//
// When many goroutines decide at once (dozens or more in flight), the
// same Redis serves several times the decisions per second; a single
// goroutine loses nothing measurable (docs/benchmarks.md). WithBatching
// needs a client with a Pipeline method (*redis.Client,
// *redis.ClusterClient and *redis.Ring have one). A Cluster pipeline is
// split by node, and returns when every node answered. Commands answered NOSCRIPT are sent again by
// EVAL. Call [RedisStore.Close] when done: it fails calls still queued
// with [ErrClosed] and waits for pipelines in flight.
func WithBatching(b Batching) Option {
	return func(c *config) error {
		if err := c.only("WithBatching", forRedis); err != nil {
			return err
		}
		switch {
		case c.noBatching:
			return errors.New("ratekit: WithBatching with WithoutBatching")
		case b.MaxBatch < 0 || b.MaxBatch > maxMaxBatch:
			return fmt.Errorf("ratekit: WithBatching: MaxBatch %d (want 1 to %d, or 0 for %d)", b.MaxBatch, maxMaxBatch, defaultMaxBatch)
		case b.Parallel < 0 || b.Parallel > maxParallel:
			return fmt.Errorf("ratekit: WithBatching: Parallel %d (want 1 to %d, or 0 for %d)", b.Parallel, maxParallel, defaultParallel)
		case b.MaxWait < 0:
			return fmt.Errorf("ratekit: WithBatching: MaxWait %v is negative", b.MaxWait)
		}
		if b.MaxBatch == 0 {
			b.MaxBatch = defaultMaxBatch
		}
		if b.Parallel == 0 {
			b.Parallel = defaultParallel
		}
		c.batching = &b
		return nil
	}
}

// WithoutBatching makes a [RedisStore] send each call as a command of its
// own, on the caller's goroutine, instead of pipelining concurrent calls
// ([WithBatching], the default). Each call then takes a pooled connection
// of its own: use it to compare, or where a proxy in front of Redis
// handles pipelines badly.
func WithoutBatching() Option {
	return func(c *config) error {
		if err := c.only("WithoutBatching", forRedis); err != nil {
			return err
		}
		if c.batching != nil {
			return errors.New("ratekit: WithoutBatching with WithBatching")
		}
		c.noBatching = true
		return nil
	}
}

// WithLeaseSize sets the most units one lease of a [LeasingStore] takes,
// whatever the limit, in place of the default of 1/64 of the limit's
// capacity (see [LeasingStore.LeaseSize]). A lease takes no more than the
// key's demand (its decisions in the current or the previous hold
// interval, whichever is more) and no more than the limit's capacity. n
// must be positive; 1 leases nothing.
func WithLeaseSize(n int) Option {
	return func(c *config) error {
		if err := c.only("WithLeaseSize", forLeasing); err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("ratekit: WithLeaseSize(%d): want at least 1", n)
		}
		c.leaseSize = n
		return nil
	}
}

// WithLeaseHold sets how long a [LeasingStore]'s leased units may be
// spent, 100ms by default; d must be positive. A key counts as hot when it
// saw at least two decisions in the current or the previous hold interval.
func WithLeaseHold(d time.Duration) Option {
	return func(c *config) error {
		if err := c.only("WithLeaseHold", forLeasing); err != nil {
			return err
		}
		if d <= 0 {
			return fmt.Errorf("ratekit: WithLeaseHold(%v): want a positive duration", d)
		}
		c.leaseHold = d
		return nil
	}
}

// WithPrefix sets the prefix of every storage key of a [Limiter],
// [DefaultPrefix] by default. Applications sharing one Redis separate
// their keys with it.
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		l, err := c.limiter("WithPrefix")
		if err != nil {
			return err
		}
		if err := storekey.ValidateName("prefix", prefix, true); err != nil {
			return err
		}
		l.prefix = prefix
		return nil
	}
}

// WithFailurePolicy sets what a [Limiter] does when the store cannot
// decide: [FailLocal] (the default), [FailOpen] or [FailClosed].
func WithFailurePolicy(p FailurePolicy) Option {
	return func(c *config) error {
		l, err := c.limiter("WithFailurePolicy")
		if err != nil {
			return err
		}
		if p >= numFailurePolicies {
			return fmt.Errorf("ratekit: unknown failure policy %d", p)
		}
		l.policy = p
		return nil
	}
}

// WithTimeout sets the deadline of each store call of a [Limiter],
// [DefaultTimeout] (50 ms) by default; a request's context with an earlier
// deadline shortens it. A call that misses it counts as a store failure and
// the request is decided by the failure policy, so no request waits for the
// store much longer than d, however the store fails. A short deadline
// bounds the latency an outage adds; too short a one turns a slow store
// into an outage.
//
// The deadline holds whatever the client: Check returns at the deadline
// even from a go-redis client that ignores contexts (its default), while
// the abandoned call finishes in the background, where [Limiter.Close]
// waits for it; such calls each run on a goroutine of their own. A store
// that gives up at the deadline itself ([Traits].KeepsDeadlines) is called
// on the request's goroutine, which saves a goroutine and a hand-off per
// call: a [RedisStore] over a client configured like this is one.
//
//	redis.NewClient(&redis.Options{
//		Addr:                  addr,
//		ContextTimeoutEnabled: true, // honour the Limiter's deadline
//		MaxRetries:            -1,   // no retries: one try takes the whole deadline
//		DialTimeout:           time.Second,
//		ReadTimeout:           time.Second, // bounds calls made without a deadline
//		WriteTimeout:          time.Second,
//	})
//
// Without ContextTimeoutEnabled, go-redis reads until its ReadTimeout (5 s
// by default) and retries up to 3 times, so an abandoned call can hold a
// connection for many seconds against a stalled Redis. MaxRetries: -1
// disables go-redis's retries (0 means its default of 3): within a deadline
// of milliseconds a retry has no time left to succeed, and the breaker
// already decides when to try again.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		l, err := c.limiter("WithTimeout")
		if err != nil {
			return err
		}
		if d <= 0 {
			return fmt.Errorf("ratekit: store timeout %v is not positive", d)
		}
		l.timeout = d
		return nil
	}
}

// WithReplicas divides each limit by n, the number of replicas expected to
// share the store, while a [Limiter] decides locally under [FailLocal]:
// rate and burst are divided, rounding up, so the fleet stays near its
// global limit during an outage when traffic is spread evenly. A limit the
// division would make invalid stays whole. The results of local decisions
// carry the divided limit. A request whose cost fits the limit but not one
// replica's share of it is denied with a RetryAfter until the breaker's
// next probe (at least a second), never as a cost that no wait can help
// ([Result.Never]): it passes once the store decides again. 1 (no
// division) by default.
func WithReplicas(n int) Option {
	return func(c *config) error {
		l, err := c.limiter("WithReplicas")
		if err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("ratekit: %d replicas (want at least 1)", n)
		}
		l.replicas = n
		return nil
	}
}

// WithFallbackOptions configures the [MemoryStore] that decides under
// [FailLocal], which the [Limiter] creates and closes. Its state is
// bounded: a key is dropped once it expires, and at most 1<<20 keys are
// kept unless [WithMaxKeys] says otherwise, so a long outage with many
// identities cannot grow it without end. NewLimiter returns the error of an
// option that does not configure a MemoryStore.
func WithFallbackOptions(opts ...Option) Option {
	return func(c *config) error {
		l, err := c.limiter("WithFallbackOptions")
		if err != nil {
			return err
		}
		l.fallbackOpts = append(l.fallbackOpts, opts...)
		return nil
	}
}

// BreakerConfig configures a [Limiter]'s circuit breaker ([WithBreaker]).
// A zero field takes its default.
type BreakerConfig struct {
	// Failures is how many consecutive failed store calls open the
	// breaker: 5 by default.
	Failures int
	// Backoff is the wait before the first probe: 100 ms by default. Each
	// failed probe doubles it.
	Backoff time.Duration
	// MaxBackoff caps the wait between probes: 1 s by default, and at
	// least Backoff.
	MaxBackoff time.Duration
}

// WithBreaker configures the circuit breaker of a [Limiter]: it opens after
// b.Failures consecutive failed store calls, and then probes the store
// with one call at a time. The first probe comes after b.Backoff; each
// failed probe doubles the wait, up to b.MaxBackoff. Every wait is drawn at
// random within ±50% of its base, and never exceeds b.MaxBackoff, so
// replicas do not probe in step and recovery is noticed within it.
//
// A low threshold spares requests the deadline sooner in an outage, at the
// risk of opening on a few chance errors; a short MaxBackoff notices
// recovery sooner, at the cost of more probes of a store that is down.
func WithBreaker(b BreakerConfig) Option {
	return func(c *config) error {
		l, err := c.limiter("WithBreaker")
		if err != nil {
			return err
		}
		b, err = b.resolve()
		if err != nil {
			return err
		}
		l.brk.cfg = b
		return nil
	}
}

// WithDeniedCache sets how many denied keys a [Limiter] remembers, 1<<16
// by default; 0 turns the cache off. A key the store denied is answered
// locally, without a store call, until the denial's retry-after, for
// requests of the same or a higher cost under the same limit; the least
// recently used keys are forgotten first. When an entry expires, one
// request asks the store while the others for the same key wait for its
// answer, so a crowd on a denied key costs the store about one call per
// retry-after.
//
// Such answers are exact: the store would deny the same request at that
// moment. Spending only ever postpones the instant a cost fits, and an
// entry expires at the local time taken before its request was sent plus
// the store's RetryAfter, never later than the store's own denial ends. A
// cost above a limit's capacity is denied locally too, with RetryAfter -1.
// The exception is a Redis that restarts empty without a failed call: it
// would allow what the cache still denies, for at most the retry-after of
// each entry (the cache is emptied whenever the breaker closes).
//
// Cached results have Remaining 0, and a RetryAfter and ResetAfter counted
// down from the store's answer for the cost it denied; other rules decided
// in the same store call report Remaining 0 and no wait, since their state
// is not known without the store. The cache assumes the store's clock runs
// at the pace of the Limiter's, as Redis's does real time. A store that
// decides in process ([Traits].InProcess) needs no cache and gets none.
func WithDeniedCache(size int) Option {
	return func(c *config) error {
		l, err := c.limiter("WithDeniedCache")
		if err != nil {
			return err
		}
		if size < 0 {
			return fmt.Errorf("ratekit: denied-key cache size %d is negative", size)
		}
		l.deniedSize = size
		return nil
	}
}

// WithLogger sets the logger of a [Limiter]; nil, the default, logs
// nothing. Failed store calls are logged at Warn at most once a second,
// each line counting the ones suppressed since the last, so an outage
// cannot flood the log; so are the breaker's openings, and their closings
// are logged at Warn too. When the logger is enabled at Debug, every rule's
// decision is logged ("ratekit: decision") with its rule, verdict, cost,
// remaining units and waits. Lines never carry storage keys, and
// identities only redacted: their kind and a keyed hash.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) error {
		l, err := c.limiter("WithLogger")
		if err != nil {
			return err
		}
		l.logger = logger
		return nil
	}
}

// OnError sets a function a [Limiter] calls with the error of every failed
// store call, the breaker's probes included, whatever the policy. It is
// called on the request's goroutine, from many at once: it must be fast and
// safe for concurrent use. Store calls skipped while the breaker is open
// are not errors.
func OnError(f func(err error)) Option {
	return func(c *config) error {
		l, err := c.limiter("OnError")
		if err != nil {
			return err
		}
		l.onError = f
		return nil
	}
}

// OnBreakerChange sets a function a [Limiter] calls on every change of its
// circuit breaker's state, such as closed → open when the store starts
// failing and half-open → closed when it is back. Calls come one at a
// time, in the order of the changes; f must not call the Limiter's Check.
func OnBreakerChange(f func(from, to BreakerState)) Option {
	return func(c *config) error {
		l, err := c.limiter("OnBreakerChange")
		if err != nil {
			return err
		}
		l.onBreaker = f
		return nil
	}
}

// WithObserver adds an [Observer] to a [Limiter], told of every decision,
// store call and breaker change. Several observers may be added; each is
// called in turn.
func WithObserver(o Observer) Option {
	return func(c *config) error {
		l, err := c.limiter("WithObserver")
		if err != nil {
			return err
		}
		if o == nil {
			return errors.New("ratekit: WithObserver: nil observer")
		}
		if l.observer == nil {
			l.observer = o
			return nil
		}
		m, ok := l.observer.(observers)
		if !ok {
			m = observers{l.observer}
		}
		l.observer = append(m, o)
		return nil
	}
}

// WithShadow puts every rule a [Limiter] checks in shadow mode, as
// [Rule.Shadow] does for one rule: decisions are made, spent, counted and
// reported as usual, but none denies a request. Use it to try new limits
// on live traffic, watching the shadow_denied outcomes of its metrics.
func WithShadow() Option {
	return func(c *config) error {
		l, err := c.limiter("WithShadow")
		if err != nil {
			return err
		}
		l.shadow = true
		return nil
	}
}
