package core

import (
	"context"
	"errors"
	"time"
)

// Store decides limits against shared or local state: package redisstore
// keeps them in Redis, package memorystore in this process, and package
// leasestore wraps a shared store to spend a hot key's units locally.
// Implementations are safe for concurrent use. Being limited is a
// [Result], never an error; an error means the store could not decide (bad
// input, or the store failed). Package core/storetest proves a store with
// one call.
//
// A store may state what it promises about its calls with a method
// Traits() [Traits], which a [Limiter] reads once: a store that wraps
// another should state the Traits of the store it wraps, changed only
// where the wrapper changes what it promises. A store may also offer
// AllowInto(ctx, checks, n, results []Result) error, AllowAllN deciding
// into results, one per check: a Limiter then calls it instead, sparing an
// allocation per decision. A store that keeps deadlines may offer, besides,
// Begin(ctx, check, n) any and Finish(ctx, call any, check, n) (Result,
// error): AllowInto for one check, begun and then waited for apart. Begin
// returns nil when it does not begin the call (the Limiter then calls
// AllowInto or AllowAllN, which says why); for any other value the Limiter
// calls Finish once, with the same ctx, check and n. A Limiter decides a
// request of one rule so, and the request's goroutine waits for the store
// in a shallow stack, which under a crowd of goroutines has less of it to
// bring back into the CPU's caches when the answer comes.
type Store interface {
	// AllowAllN decides one or several limits at once, all or nothing: n
	// units are spent from every check's key only if every limit allows
	// them. The results follow the order of checks. When one limit denies,
	// every result has Allowed false, nothing is spent, and each result
	// describes its key as it stands (RetryAfter 0 for a limit that had
	// room). A cost above a limit's capacity is denied without spending
	// anything, with RetryAfter -1 ([Result.Never]).
	//
	// In a Redis Cluster all keys must share one hash slot, as the keys a
	// [Limiter] builds for one identity do: prefix + rule + ":{" +
	// identity + "}".
	AllowAllN(ctx context.Context, checks []Check, n int) ([]Result, error)
}

// intoStore is a [Store] that decides into results the caller gives it,
// one per check, sparing the allocation of a slice (see [Store]).
type intoStore interface {
	AllowInto(ctx context.Context, checks []Check, n int, results []Result) error
}

// beginStore is a [Store] that begins the decision of one check and
// finishes it apart (see [Store]).
type beginStore interface {
	Begin(ctx context.Context, check Check, n int) any
	Finish(ctx context.Context, call any, check Check, n int) (Result, error)
}

// traitsReporter is a [Store] that states its [Traits] (see [Store]).
type traitsReporter interface {
	Traits() Traits
}

// traitsOf returns the [Traits] that s states, or the zero Traits when it
// states none.
func traitsOf(s Store) Traits {
	if r, ok := s.(traitsReporter); ok {
		return r.Traits()
	}
	return Traits{}
}

// Traits says what a [Store] promises about its calls, so that a [Limiter]
// calls it the best way it safely can. The zero value promises nothing: the
// Limiter then gives each call a goroutine that it abandons at the
// deadline, a circuit breaker, a failure policy and a denied-key cache.
type Traits struct {
	// KeepsDeadlines reports that every call returns by its context's
	// deadline on its own, and frees what it holds: the Limiter then calls
	// the store on the request's goroutine. A redisstore.Store that
	// batches, whatever its client, or one over a go-redis client with
	// ContextTimeoutEnabled, keeps deadlines.
	KeepsDeadlines bool
	// InProcess reports that the store decides in this process's memory:
	// its calls neither wait on I/O nor fail for want of a backend, so the
	// Limiter calls it directly, without deadline, breaker, failure policy
	// or denied-key cache. A memorystore.Store decides in process.
	InProcess bool
	// Shard, when set, names the part of the store that holds key, such
	// as the address of the Redis Cluster master serving the key's hash
	// slot, or returns "" when it cannot tell. Keys that share a hash tag
	// share a shard. The Limiter then keeps a circuit breaker per shard:
	// a failing shard's keys go to the failure policy while every other
	// shard's keys are still decided by the store, and a failing shard is
	// probed with a key of the hash tag that failed. Shard must be fast
	// and never wait on I/O. A redisstore.Store over a *redis.ClusterClient
	// states it; nil means the store fails as one.
	Shard func(key string) string
}

// Check is one limit to decide on one storage key, for [Store.AllowAllN].
type Check struct {
	Key   string
	Limit Limit
	// Override, when not empty, is the key of the identity's override of
	// Limit, which a store that keeps overrides ([QuotaStore]) reads in
	// the same call: an override there replaces Limit's rate, period and
	// burst, the algorithm staying Limit's, and the Result's Limit is the
	// one applied. A store without overrides ignores it. It must differ
	// from Key and share Key's Redis Cluster hash tag, as the keys a
	// [Limiter] builds for a rule with [Rule.Overrides] do: Key +
	// ":override".
	Override string
	// ResetAfter, in a call of [QuotaStore.RefundAllN], tells which spend
	// the units given back come from: what is left of the ResetAfter of
	// the allowed [Result] that spent them, that ResetAfter less the time
	// since, as [Limiter.Refund] sets it. A store gives back to that spend
	// only, taking ResetAfter to be good within a quarter of the limit's
	// period (at least 2 ms), which covers the delays of the call and of
	// the refund and two clocks that drift apart: a fixed window's units
	// go back to the window that ends then (the one they were spent in),
	// never to a later one; a sliding counter's to the count of the window
	// they were spent in; a sliding log's are the members admitted in the
	// instant nearest to a period before then, none when no instant is
	// that near; a GCRA key's units come back whole (a caller gives back
	// nothing once ResetAfter has passed, when they have refilled). Below
	// 0, the spend counts no longer and nothing goes back; 0 tells
	// nothing, and the units go back to the key as it stands. Other calls
	// ignore it.
	ResetAfter time.Duration
}

// QuotaStore is a [Store] that can also read, give back and clear what its
// keys have spent, keep per-identity overrides of limits, and tell of
// resets: what [Limiter.Peek], [Limiter.Refund], [Limiter.Reset],
// [Limiter.SetOverride] and [Limiter.ClearOverride] need. The stores of
// packages redisstore, memorystore and leasestore implement it; the
// conformance suite (package core/storetest) proves a store's methods.
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
	// as a reserved unit of a request whose answer should not count, to
	// the spend each check's ResetAfter names ([Check]). A key never holds
	// more than its capacity: a refund of more than was spent leaves it
	// full. The results are what [QuotaStore.PeekAll] would answer after
	// the refund.
	RefundAllN(ctx context.Context, checks []Check, n int) ([]Result, error)
	// Reset clears each key, so that its next call finds it full, and
	// tells every process that watches the store (WatchResets) of the keys
	// reset, so that what they remember of those keys goes too.
	Reset(ctx context.Context, keys ...string) error
	// SetOverride stores limit's rate, period and burst as the override at
	// key override of the storage key key, for ttl (0: until cleared),
	// replacing any override there, and tells watchers of key, so that a
	// denial remembered under the old limit goes. A check whose
	// [Check.Override] names an override the store holds is decided,
	// peeked and refunded under the override's rate, period and burst,
	// read within the same call, and its Result's Limit is the limit
	// applied.
	SetOverride(ctx context.Context, key, override string, limit Limit, ttl time.Duration) error
	// ClearOverride removes the override at key override of the storage
	// key key, if any, and tells watchers of key as SetOverride does.
	ClearOverride(ctx context.Context, key, override string) error
	// WatchResets calls fn with each key that a Reset through any process
	// sharing the store clears, or whose override it sets or clears, this
	// process's own included, until stop is called; stop waits for calls
	// of fn in progress to return. fn runs on a goroutine of the store's
	// and must not block. It returns an error when the store cannot watch
	// (a Redis client without pub/sub). A store that may have missed
	// resets, such as one whose subscription was lost for a while, calls
	// fn with the empty key once it watches again: resets made meanwhile
	// went unheard, and the watcher forgets what it remembers of every
	// key. A [Limiter] over the store watches it and forgets what it
	// remembers of each key it hears of: its denied-key cache entry and
	// its fallback state (for the empty key, every cached denial).
	WatchResets(fn func(key string)) (stop func(), err error)
}

// ResetWatchReporter is implemented by a [QuotaStore] that can tell a
// watcher why watching fails after WatchResets returned, such as a Redis
// user that may not subscribe to the store's channel. A [Limiter] watches
// through it when its store has it, and reports such an error to
// [OnError] and its logger: resets made through other processes no longer
// reach it, and nothing else would say so.
type ResetWatchReporter interface {
	// WatchResetsReporting is WatchResets, calling report with each error
	// that stops the watching from working, from a goroutine of the store's.
	WatchResetsReporting(fn func(key string), report func(error)) (stop func(), err error)
}

// ErrClosed is returned, wrapped, by a store that has been closed.
var ErrClosed = errors.New("ratekit: store closed")

// ErrNotSent is wrapped, with the context's error, by a store that gave up
// on a call before any of it went out, such as one still queued for a
// pipeline when its context ended: the call spent nothing. A [Limiter]
// then gives nothing back to the store when the decision is refunded,
// where a call cut at its deadline after it was sent may have spent, and
// gets its units back as if it had (see [Limiter.Refund]).
var ErrNotSent = errors.New("ratekit: store call not sent")

// ErrMalformedReply is returned, wrapped, when a store answers with
// something other than what it documents: a script reply that cannot be
// read, or the wrong number of results.
var ErrMalformedReply = errors.New("ratekit: malformed script reply")
