// Package inflight caps how many requests run at once, across every replica
// that shares a Redis: at most N requests of one identity (or of one route,
// or of the whole service) in flight at any moment.
//
// A rate limit ([core.Limiter]) counts requests over time; a concurrency
// limit counts the requests running now, and frees a slot when one ends.
// It protects what a rate cannot: a slow backend, a pool of connections, a
// client that opens many long requests at once.
//
// # How it works
//
// Each limited key is a Redis sorted set of the holders of its slots, each a
// random ID scored by the expiry of its lease, in Redis's clock. One Lua
// script drops the expired holders, counts the rest and adds the new one if
// the cap allows ([Limiter.Acquire]); releasing removes it
// ([Lease.Release]). While a request runs, one goroutine per [Limiter]
// renews the leases of all of its holders, every third of the lease time,
// in one script call per key, pipelined: a thousand keys per round trip
// (per node of a Cluster). A process that dies (SIGKILL, a lost node)
// stops renewing: its slots come back by themselves once their lease runs
// out, within [DefaultLease] by default ([WithLease]).
//
// # Scale
//
// A renewal round costs one round trip per thousand busy keys (keys with
// a request in flight in this process) and a few microseconds of Redis's
// and the client's time per key. Measured against a real redis-server
// through a proxy that adds 1 ms or 4 ms to every reply, all on one
// loaded two-core machine (BenchmarkRenewRound, rounds of 100,000 busy
// keys): 13 to 17 µs a key at either latency, so 100,000 busy keys are
// renewed in under 1.8 s, within the 3.3 s between two rounds at the
// default lease. At that rate a round renews some 600,000 keys in a lease
// time; one that stays within half the lease leaves the other half for a
// slow moment, so renewals keep up with about 300,000 busy keys per
// process at 1 ms and at 4 ms with the default lease, and a lease of d
// scales that by d / 10 s. Renewing key after key, one round trip each,
// as a client that does not pipeline does (neither a *redis.Client, a
// *redis.ClusterClient nor a *redis.Ring), keeps up with some 8,000 busy
// keys at 1 ms and 2,200 at 4 ms.
//
// Storage keys are built like core's, prefix + rule + ":{" + identity +
// "}" ("ratekit:" by default), so a Redis Cluster keeps every key of one
// identity in one slot. Give concurrency rules names of their own, apart
// from the rate rules' names, or a prefix of their own ([WithPrefix]): a key
// is either a rate limit's or a concurrency limit's, and a call on a key of
// the other kind fails with [core.ErrKeyRejected].
//
// # When Redis fails
//
// Every Redis call has a deadline ([WithTimeout], 50 ms by default), held
// even by a client that ignores contexts. When Redis fails or misses it, the
// [core.FailurePolicy] decides ([WithFailurePolicy]): [core.FailLocal] (the
// default) caps each key with a semaphore in this process, of the same size
// or of its share under [WithReplicas]; [core.FailOpen] lets every request
// through; [core.FailClosed] refuses every request, and the middleware
// answers 503. A lease taken without Redis is marked degraded and released
// where it was taken.
//
// A slot that no request holds any more is given back even when Redis
// fails meanwhile. An acquisition that missed its deadline (or was cut
// off) may have taken a slot in Redis all the same, whichever way the
// client is called: the Limiter releases its holder as soon as it can,
// then again, after a wait that doubles up to a third of the lease time,
// until Redis removes it or its lease would have run out (a release sent
// on another connection may reach Redis first). A release that fails
// (Redis down, or too slow) is retried the same way. A slot whose every
// release fails is held until its lease runs out, at most the lease time
// after the request ended, since nothing renews it. An outage longer than
// the lease time loses the leases of the requests it outlasts (see
// [Lease.Lost]): their slots count no longer, and the cap may be exceeded
// until they end.
//
// # HTTP
//
// [Middleware] limits net/http handlers (and chi, gorilla/mux): a request
// beyond the cap gets 429 Too Many Requests with Retry-After and a
// problem+json body, like the rate-limiting adapters' (package
// [github.com/ratekit/ratekit/core/adapter]), and the slot is released
// when the handler returns, also when it panics. [Guard] is the
// framework-neutral part of it, for other frameworks' adapters: one call
// when a request arrives, one deferred call when it ends.
package inflight
