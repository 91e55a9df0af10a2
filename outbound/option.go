package outbound

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/internal/storekey"
)

// Defaults of the options.
const (
	// DefaultPrefix starts every key of a Limiter unless [WithPrefix] says
	// otherwise: a prefix of its own, apart from the rate limits' keys.
	DefaultPrefix = "ratekit:outbound:"
	// DefaultTimeout is the deadline of each Redis call ([WithTimeout]).
	DefaultTimeout = 50 * time.Millisecond
	// DefaultMargin is the fraction of each period left unused
	// ([WithMargin]).
	DefaultMargin = 0.03
	// DefaultHeartbeat is how often a Limiter tells Redis it is alive
	// ([WithHeartbeat]).
	DefaultHeartbeat = time.Second
	// DefaultBreakerFailures is how many consecutive failed Redis calls
	// open the circuit breaker ([WithBreaker]).
	DefaultBreakerFailures = 5
	// DefaultBreakerOpen is how long the breaker stays open before one
	// call probes Redis again ([WithBreaker]).
	DefaultBreakerOpen = 500 * time.Millisecond
)

// Option configures a [Limiter]. [New] returns the error of a bad value,
// so a misconfiguration fails at start-up.
type Option func(*config) error

type config struct {
	prefix      string
	timeout     time.Duration
	margin      float64
	fleet       int
	heartbeat   time.Duration
	aimd        *AIMD
	failures    int
	openFor     time.Duration
	observers   []Observer
	onError     func(error)
	noSubscribe bool
	now         func() time.Time // the local clock; a test hook
}

// WithPrefix sets the prefix of every key, [DefaultPrefix] by default: at
// most 128 bytes, without '{', '}' or control bytes.
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		if err := storekey.ValidateName("prefix", prefix, true); err != nil {
			return err
		}
		c.prefix = prefix
		return nil
	}
}

// WithTimeout sets the deadline of each Redis call, [DefaultTimeout] (50
// ms) by default; a context with an earlier deadline shortens it. A call
// that misses it counts as a failure of Redis, and the caller is decided
// by this process's share of the rate (see [Limiter]). The deadline holds
// whatever the client. A *redis.Client without ContextTimeoutEnabled
// ignores contexts: the Limiter sends its calls through a clone of the
// client over the same pool that keeps them, on the caller's goroutine (a
// hook it adds to the client routes them there; hooks added to the client
// later do not see them). Over a Cluster or Ring client without it, calls
// run on a goroutine of their own that the caller abandons at the
// deadline.
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("ratekit: outbound: timeout %v is not positive", d)
		}
		c.timeout = d
		return nil
	}
}

// WithMargin sets the fraction f of each period left unused, 0 ≤ f < 0.5,
// [DefaultMargin] (3%) by default: units are Period × (1 + f) / Rate apart.
// The upstream counts arrivals, which the network and the scheduler delay
// unevenly; the margin absorbs up to f × Period of such jitter between two
// units one period apart, so that no window of the upstream's sees more
// than Rate. A wait that wakes up later than the margin past its turn
// (a process stalled by its scheduler or its garbage collector) takes a
// new turn rather than use that one. 0 spaces units exactly Period/Rate
// apart, as golang.org/x/time/rate does, and uses every turn however late.
func WithMargin(f float64) Option {
	return func(c *config) error {
		if !(f >= 0 && f < 0.5) {
			return fmt.Errorf("ratekit: outbound: margin %v: want 0 ≤ f < 0.5", f)
		}
		c.margin = f
		return nil
	}
}

// WithFleetSize tells the Limiter how many processes share its limit, n ≥
// 1, for the time Redis cannot decide: each process then lets through its
// share, Rate/n. The Limiter also learns the fleet's size while Redis is up
// (each process beats a heartbeat into a sorted set), and takes the larger
// of the two. Without either, a process that never reached Redis lets
// nothing through until it does: a fleet that falls back to the whole rate
// in every process sends the upstream n times too much.
func WithFleetSize(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("ratekit: outbound: fleet size %d (want at least 1)", n)
		}
		c.fleet = n
		return nil
	}
}

// WithHeartbeat sets how often the Limiter renews its membership of the
// fleet, [DefaultHeartbeat] (1 s) by default: one script call each time. A
// process not heard from for three heartbeats no longer counts, so the
// learned fleet size follows a fleet that shrinks within three heartbeats,
// and one that grows at once.
func WithHeartbeat(d time.Duration) Option {
	return func(c *config) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("ratekit: outbound: heartbeat %v is shorter than 10ms", d)
		}
		c.heartbeat = d
		return nil
	}
}

// WithBreaker configures the circuit breaker in front of Redis: it opens
// after failures consecutive failed calls ([DefaultBreakerFailures]), and
// stays open for openFor ([DefaultBreakerOpen]), deciding every call by
// the process's share without calling Redis; then one call probes Redis,
// and closes it if it answers.
func WithBreaker(failures int, openFor time.Duration) Option {
	return func(c *config) error {
		if failures < 1 || openFor <= 0 {
			return fmt.Errorf("ratekit: outbound: breaker of %d failures, open for %v: want at least 1 and a positive time", failures, openFor)
		}
		c.failures, c.openFor = failures, openFor
		return nil
	}
}

// WithObserver adds an [Observer], told of waits, the queue, the
// upstream's refusals, pauses, the adaptive rate, Redis calls and the
// breaker. Several may be added; each is called in turn.
func WithObserver(o Observer) Option {
	return func(c *config) error {
		if o == nil {
			return errors.New("ratekit: outbound: WithObserver: nil observer")
		}
		c.observers = append(c.observers, o)
		return nil
	}
}

// OnError sets a function called with the error of every failed Redis
// call, from many goroutines at once: it must be fast and safe for
// concurrent use.
func OnError(f func(err error)) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("ratekit: outbound: OnError: nil function")
		}
		c.onError = f
		return nil
	}
}

// WithAIMD turns on the adaptive rate: the rate every process shares is
// lowered when the upstream refuses ([Limiter.Refused], which the
// [Transport] calls for each 429) and raised again while it does not
// (additive increase, multiplicative decrease). The zero AIMD takes every
// default.
func WithAIMD(a AIMD) Option {
	return func(c *config) error {
		if err := a.validate(); err != nil {
			return err
		}
		c.aimd = &a
		return nil
	}
}

// AIMD configures the adaptive rate ([WithAIMD]), which every process
// shares through Redis. The rate starts at the Limit's. When the upstream
// refuses, it is multiplied by Decrease and the refused rate is
// remembered. Each period without a refusal adds Increase, up to the
// Limit's rate, but for Hold after a refusal only up to the refused rate
// less Increase: the last rate that went a period unrefused. A change
// reaches the upstream only once the turns already handed out have gone,
// so each change waits for that, and a period more, before the next:
// refusals of turns handed out before a decrease count once. An upstream
// that lowered its limit and keeps it lower sees refusals die out: after
// one or two, the rate settles within Increase below its new limit, and
// probes above it once per Hold. Time paused counts for nothing.
type AIMD struct {
	// Decrease multiplies the rate at each refusal, 0 < Decrease < 1: 0.5
	// by default.
	Decrease float64
	// Increase is added to the rate each period without a refusal, in
	// units per period: a tenth of the Limit's rate by default.
	Increase float64
	// Min is the lowest rate, in units per period: a twentieth of the
	// Limit's rate (at least 1) by default.
	Min float64
	// Hold is how long the rate stays below a rate the upstream refused:
	// one minute by default.
	Hold time.Duration
}

func (a AIMD) validate() error {
	switch {
	case a.Decrease < 0 || a.Decrease >= 1:
		return fmt.Errorf("ratekit: outbound: AIMD decrease %v: want 0 < d < 1 (0 for the default)", a.Decrease)
	case a.Increase < 0, a.Min < 0, a.Hold < 0:
		return fmt.Errorf("ratekit: outbound: AIMD %+v: negative value", a)
	}
	return nil
}

// resolved returns a with its defaults filled in for limit.
func (a AIMD) resolved(limit Limit) AIMD {
	if a.Decrease == 0 {
		a.Decrease = 0.5
	}
	if a.Increase == 0 {
		a.Increase = max(float64(limit.Rate)/10, 1e-3)
	}
	if a.Min == 0 {
		a.Min = max(float64(limit.Rate)/20, 1)
	}
	a.Min = min(a.Min, float64(limit.Rate))
	if a.Hold == 0 {
		a.Hold = time.Minute
	}
	return a
}

// withoutSubscribe keeps the Limiter from subscribing to pauses (tests of
// the path without pub/sub).
func withoutSubscribe() Option {
	return func(c *config) error {
		c.noSubscribe = true
		return nil
	}
}

// withClock sets the Limiter's local clock (tests of skewed processes).
func withClock(now func() time.Time) Option {
	return func(c *config) error {
		c.now = now
		return nil
	}
}
