package inflight

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storekey"
)

// Option configures a [Limiter]. [New] returns the error of a bad value, so
// a misconfiguration fails at start-up and never at request time.
type Option func(*Limiter) error

// DefaultLease is the lease time of a slot unless [WithLease] says
// otherwise.
const DefaultLease = 10 * time.Second

// DefaultTimeout is the deadline of each Redis call on a request's path
// unless [WithTimeout] says otherwise.
const DefaultTimeout = 50 * time.Millisecond

// DefaultRetryAfter is the Retry-After of a denial: a concurrency limit
// cannot tell when a running request will end, so a client is told to try
// again in a second, the shortest wait Retry-After can say.
const DefaultRetryAfter = time.Second

// MinLease is the shortest lease time [WithLease] accepts.
const MinLease = 100 * time.Millisecond

// WithLease sets how long a slot stays held without renewal, [DefaultLease]
// (10 s) by default and at least [MinLease]. The Limiter renews the leases
// of its running requests every third of it, so d bounds two things: how
// long the slots of a process that died stay taken, and how long an outage
// of Redis may last before running requests lose their leases. A short
// lease frees a dead process's slots sooner and costs more renewals: one
// script call per key with requests in flight, per process, every d/3,
// pipelined a thousand to a round trip. The default frees them before
// most clients give up waiting (30 s and more), for one call per busy key
// every 3.3 s; the renewals of one process keep up with some 300,000
// busy keys at 1 ms or 4 ms from Redis (see Scale in the package
// documentation), and a shorter lease lowers that in proportion.
func WithLease(d time.Duration) Option {
	return func(l *Limiter) error {
		if d < MinLease {
			return fmt.Errorf("ratekit: inflight: lease %v is shorter than %v", d, MinLease)
		}
		l.lease = d
		return nil
	}
}

// WithTimeout sets the deadline of each acquisition and release,
// [DefaultTimeout] (50 ms) by default; a request's context with an earlier
// deadline shortens it. A call that misses it counts as a failure of Redis
// and goes to the failure policy. The deadline holds whatever the client.
// A *redis.Client without ContextTimeoutEnabled ignores it: the Limiter
// sends its calls through a clone of the client over the same pool that
// keeps it, on the request's goroutine (a hook it adds to the client routes
// them there; hooks added to the client later do not see them). Over a
// Cluster or Ring client without it, the call runs on a goroutine of its
// own, which the request abandons at the deadline ([Limiter.Close] waits
// for it). Either way, a slot that an acquisition past its deadline took
// after all is given back: as soon as its late reply comes, or, when no
// reply will come (a client that keeps the deadline gives up at it), by
// releasing its holder until Redis has removed it (see the package
// documentation's When Redis fails). Renewals, off the request path, get
// the longer of d and a tenth of the lease time.
func WithTimeout(d time.Duration) Option {
	return func(l *Limiter) error {
		if d <= 0 {
			return fmt.Errorf("ratekit: inflight: timeout %v is not positive", d)
		}
		l.timeout = d
		return nil
	}
}

// WithPrefix sets the prefix of every storage key, [core.DefaultPrefix]
// ("ratekit:") by default. At most [core.MaxNameLen] bytes, without '{',
// '}' or control bytes.
func WithPrefix(prefix string) Option {
	return func(l *Limiter) error {
		if err := storekey.ValidateName("prefix", prefix, true); err != nil {
			return err
		}
		l.prefix = prefix
		return nil
	}
}

// WithFailurePolicy sets what the Limiter does when Redis cannot decide:
// [core.FailLocal] (the default) caps each key in this process,
// [core.FailOpen] allows every request, [core.FailClosed] denies them all
// with an error wrapping [core.ErrUnavailable].
func WithFailurePolicy(p core.FailurePolicy) Option {
	return func(l *Limiter) error {
		switch p {
		case core.FailLocal, core.FailOpen, core.FailClosed:
			l.policy = p
			return nil
		}
		return fmt.Errorf("ratekit: inflight: unknown failure policy %v", p)
	}
}

// WithReplicas divides each cap by n, the number of replicas expected to
// share the Redis, while the Limiter decides locally under
// [core.FailLocal]: each replica then lets through its share, rounded up,
// so an evenly loaded fleet stays near its cap during an outage. 1 (no
// division) by default.
func WithReplicas(n int) Option {
	return func(l *Limiter) error {
		if n < 1 {
			return fmt.Errorf("ratekit: inflight: %d replicas (want at least 1)", n)
		}
		l.replicas = n
		return nil
	}
}

// OnError sets a function the Limiter calls with the error of every failed
// Redis call: acquisitions, releases and renewals, whatever the policy. It
// is called from request goroutines and the renewal goroutine at once: it
// must be fast and safe for concurrent use.
func OnError(f func(err error)) Option {
	return func(l *Limiter) error {
		if f == nil {
			return errors.New("ratekit: inflight: OnError: nil function")
		}
		l.onError = f
		return nil
	}
}
