package core

import (
	"context"
	"fmt"
	"time"
)

// Store decides limits against shared or local state. Implementations are
// safe for concurrent use. Being limited is a [Result], never an error; an
// error means the store could not decide (bad input, or the store failed).
type Store interface {
	// AllowAllN decides one or several limits at once, all or nothing: n
	// units are spent from every check's key only if every limit allows
	// them. The results follow the order of checks. When one limit denies,
	// every result has Allowed false, nothing is spent, and each result
	// describes its key as it stands (RetryAfter 0 for a limit that had
	// room). A cost above a limit's capacity is denied without spending
	// anything, with RetryAfter -1 ([Result.Never]).
	//
	// In a Redis Cluster all keys must share one hash slot, as the keys
	// [Limiter.StorageKey] builds for one identity do.
	AllowAllN(ctx context.Context, checks []Check, n int) ([]Result, error)
}

// Traits says what a [Store] promises about its calls, so that a [Limiter]
// calls it the best way it safely can. The zero value promises nothing: the
// Limiter then gives each call a goroutine that it abandons at the
// deadline, a circuit breaker, a failure policy and a denied-key cache.
type Traits struct {
	// KeepsDeadlines reports that every call returns by its context's
	// deadline on its own, and frees what it holds: the Limiter then calls
	// the store on the request's goroutine. A [RedisStore] over a go-redis
	// client with ContextTimeoutEnabled keeps deadlines.
	KeepsDeadlines bool
	// InProcess reports that the store decides in this process's memory:
	// its calls neither wait on I/O nor fail for want of a backend, so the
	// Limiter calls it directly, without deadline, breaker, failure policy
	// or denied-key cache. A [MemoryStore] decides in process.
	InProcess bool
	// Shard, when set, names the part of the store that holds key, such
	// as the address of the Redis Cluster master serving the key's hash
	// slot, or returns "" when it cannot tell. Keys that share a hash tag
	// share a shard. The Limiter then keeps a circuit breaker per shard:
	// a failing shard's keys go to the failure policy while every other
	// shard's keys are still decided by the store, and a failing shard is
	// probed with a key of the hash tag that failed. Shard must be fast
	// and never wait on I/O. A [RedisStore] over a *redis.ClusterClient
	// states it; nil means the store fails as one.
	Shard func(key string) string
}

// TraitsReporter is implemented by a [Store] that states its [Traits].
// A store that wraps another (for metrics, tracing, leasing) should
// implement it by returning [TraitsOf] the store it wraps, changed only
// where the wrapper changes what the inner store promises; otherwise the
// wrapped store is called as if it promised nothing.
type TraitsReporter interface {
	Traits() Traits
}

// TraitsOf returns the [Traits] that s states, or the zero Traits when it
// states none.
func TraitsOf(s Store) Traits {
	if r, ok := s.(TraitsReporter); ok {
		return r.Traits()
	}
	return Traits{}
}

// Check is one limit to decide on one storage key, for [Store.AllowAllN].
type Check struct {
	Key   string
	Limit Limit
	// Override, when not empty, is the key of the identity's override of
	// Limit, which a store that keeps overrides ([OverrideStore]) reads in
	// the same call: an override there replaces Limit's rate, period and
	// burst, the algorithm staying Limit's, and the Result's Limit is the
	// one applied. A store without overrides ignores it. It must differ
	// from Key and share Key's Redis Cluster hash tag, as the keys a
	// [Limiter] builds for a rule with [Rule.Overrides] do: Key +
	// ":override".
	Override string
}

// maxChecks bounds how many limits one call may decide.
const maxChecks = 64

// validate checks the arguments every store takes, before any work.
func validate(checks []Check, n int) error {
	if n < 1 {
		return fmt.Errorf("%w: %d units (want at least 1)", ErrInvalidCost, n)
	}
	if len(checks) == 0 || len(checks) > maxChecks {
		return fmt.Errorf("%w: %d checks in one call (want 1 to %d)", ErrInvalidLimit, len(checks), maxChecks)
	}
	for i := range checks {
		if checks[i].Key == "" {
			return fmt.Errorf("%w: empty storage key", ErrInvalidIdentity)
		}
		if o := checks[i].Override; o != "" {
			if err := validateOverrideKey(checks[i].Key, o); err != nil {
				return err
			}
		}
		lim := checks[i].Limit
		if err := lim.Validate(); err != nil {
			return err
		}
		if lim.Algorithm == SlidingWindowLog && n > MaxLogCost && n <= lim.Rate {
			return fmt.Errorf("%w: %d units in one call of %v (at most %d)", ErrInvalidCost, n, lim, MaxLogCost)
		}
	}
	return nil
}

// result builds a Result from the four integers a decision yields, with
// durations in microseconds. Remaining below zero, which a key spent under
// a higher limit than limit reports, is zero.
func result(limit Limit, allowed bool, remaining, retryUS, resetUS int64) Result {
	remaining = max(remaining, 0)
	retry := time.Duration(retryUS) * time.Microsecond
	if retryUS < 0 {
		retry = -1
	}
	return Result{
		Limit:      limit,
		Allowed:    allowed,
		Remaining:  int(remaining),
		RetryAfter: retry,
		ResetAfter: time.Duration(resetUS) * time.Microsecond,
	}
}

// QuotaStore is a [Store] that can also read, give back and clear what its
// keys have spent: what [Limiter.Peek], [Limiter.Refund] and
// [Limiter.Reset] need. [RedisStore], [MemoryStore] and [LeasingStore]
// implement it; the conformance suite (package core/storetest) proves a
// store's methods when it does.
type QuotaStore interface {
	Store
	// PeekAll reports what each check's key would answer a request of one
	// unit now, without spending anything: Allowed when a unit is left,
	// Remaining, the units left now (a request of one unit would leave
	// Remaining−1), RetryAfter until one unit fits (0 when one does), and
	// ResetAfter until the key is full again (0 when it is). Each check is
	// read on its own, not all or nothing. What a key spent under another
	// limit than its check's counts under the check's, as for every call.
	// Nothing is spent; a store may still tidy what it reads, as a sliding
	// log drops members past its window.
	PeekAll(ctx context.Context, checks []Check) ([]Result, error)
	// RefundAllN gives n units back to each check's key, units that a call
	// of [Store.AllowAllN] spent and the caller chooses not to count, such
	// as a reserved unit of a request whose answer should not count. A key
	// never holds more than its capacity: a refund of more than was spent
	// leaves it full. The results are what [QuotaStore.PeekAll] would
	// answer after the refund.
	RefundAllN(ctx context.Context, checks []Check, n int) ([]Result, error)
	// Reset clears each key, so that its next call finds it full. A store
	// shared between processes also tells every process that watches it
	// ([ResetWatcher]) of the keys reset, so that what they remember of
	// those keys goes too.
	Reset(ctx context.Context, keys ...string) error
}

// ResetWatcher is implemented by a [Store] shared between processes that
// tells each of them of the keys reset through any other: a [RedisStore]
// publishes every reset on [ResetChannel] (Redis pub/sub, which reaches
// every node of a Cluster). A [Limiter] over such a store watches it and
// forgets what it remembers of a reset key: its denied-key cache entry and
// its fallback state.
type ResetWatcher interface {
	// WatchResets calls fn with each key that a Reset through any process
	// sharing the store clears, or whose override ([OverrideStore]) it sets
	// or clears, this process's own included, until
	// stop is called; stop waits for calls of fn in progress to return. fn
	// runs on a goroutine of the store's and must not block. It returns an
	// error when the store cannot watch (a client without pub/sub).
	WatchResets(fn func(key string)) (stop func(), err error)
}

// ResetChannel is the Redis pub/sub channel on which a [RedisStore]
// publishes the keys it resets, one message a key.
const ResetChannel = "ratekit:resets"
