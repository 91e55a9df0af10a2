package core

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ratekit/ratekit/internal/storekey"
)

// Option configures a [Limiter]. Each takes its value as given and
// [NewLimiter] returns the error of a bad one, so a misconfiguration fails
// at start-up and never at request time.
type Option func(*Limiter) error

// WithClock makes a [Limiter] read time from now instead of [time.Now],
// for its circuit breaker's and denied-key cache's timing and its
// fallback's counting: tests step time by hand with it. The store's clock
// is its own (Redis's, for package redisstore's).
func WithClock(now func() time.Time) Option {
	return func(l *Limiter) error {
		if now == nil {
			return errors.New("ratekit: WithClock: nil clock")
		}
		l.clock = now
		return nil
	}
}

// WithPrefix sets the prefix of every storage key of a [Limiter],
// [DefaultPrefix] by default. Applications sharing one Redis separate
// their keys with it.
func WithPrefix(prefix string) Option {
	return func(l *Limiter) error {
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
	return func(l *Limiter) error {
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
// even from a go-redis client that ignores contexts (its default). Calls
// to a store that keeps deadlines share them (see below): such a call's
// deadline may come up to a 64th of d early, never late. A store
// that gives up at the deadline itself ([Traits].KeepsDeadlines) is called
// on the request's goroutine: a redisstore.Store over a *redis.Client,
// whatever the client's options, is one (over a client without
// ContextTimeoutEnabled it sends its calls through a clone of the client
// that keeps them), and so is one over any client configured like this.
// Calls to any other store each run on a goroutine of their own, which
// Check abandons at the deadline while the call finishes in the
// background, where [Limiter.Close] waits for it. With
// ContextTimeoutEnabled a missed deadline frees its connection at once,
// for every client type:
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
// Without ContextTimeoutEnabled, a Cluster or Ring client reads until its
// ReadTimeout (5 s by default) and retries up to 3 times, so an abandoned
// call can hold a connection for many seconds against a stalled Redis. MaxRetries: -1
// disables go-redis's retries (0 means its default of 3): within a deadline
// of milliseconds a retry has no time left to succeed, and the breaker
// already decides when to try again.
func WithTimeout(d time.Duration) Option {
	return func(l *Limiter) error {
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
	return func(l *Limiter) error {
		if n < 1 {
			return fmt.Errorf("ratekit: %d replicas (want at least 1)", n)
		}
		l.replicas = n
		return nil
	}
}

// WithFallbackMaxKeys bounds how many keys the in-process store that
// decides under [FailLocal] keeps, 1<<20 by default; n must be positive.
// The fallback's state is bounded in any case: a key is dropped once it
// expires, and when a new key would exceed the bound the least recently
// used go first, so a long outage with many identities cannot grow it
// without end.
func WithFallbackMaxKeys(n int) Option {
	return func(l *Limiter) error {
		if n < 1 {
			return fmt.Errorf("ratekit: WithFallbackMaxKeys(%d): want at least 1", n)
		}
		l.fallbackKeys = n
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
	return func(l *Limiter) error {
		b, err := b.resolve()
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
	return func(l *Limiter) error {
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
	return func(l *Limiter) error {
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
	return func(l *Limiter) error {
		l.onError = f
		return nil
	}
}

// OnBreakerChange sets a function a [Limiter] calls on every change of its
// circuit breaker's state, such as closed → open when the store starts
// failing and half-open → closed when it is back. Over a store that states
// shards ([Traits].Shard), such as a Redis Cluster, the state is open
// while any shard's breaker is open, half-open while one is being probed
// and none is open, and closed when all are closed. Calls come one at a
// time, in the order of the changes; f must not call the Limiter's Check.
func OnBreakerChange(f func(from, to BreakerState)) Option {
	return func(l *Limiter) error {
		l.onBreaker = f
		return nil
	}
}

// WithObserver adds an [Observer] to a [Limiter], told of every decision,
// store call and breaker change. Several observers may be added; each is
// called in turn.
func WithObserver(o Observer) Option {
	return func(l *Limiter) error {
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
	return func(l *Limiter) error {
		l.shadow = true
		return nil
	}
}
