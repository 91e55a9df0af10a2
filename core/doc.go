// Package core is what an application uses to limit requests with ratekit:
// a [Limit] (such as [PerMinute](100)), named [Rule]s that say what each
// limit applies to, and a [Limiter] that checks a [Request] against rules
// and returns a [Decision], over a [Store].
//
// The store decides. Package redisstore keeps limits in Redis, so that any
// number of replicas share one limit exactly; package memorystore keeps
// them in this process; package leasestore spends a hot key's units
// locally over a shared store. Build the store once, then the Limiter over
// it:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1})
//	store, err := redisstore.New(rdb)
//	...
//	limiter, err := core.NewLimiter(store)
//	...
//	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}
//
// and install the rules with an adapter: nethttp, ginlimit, echolimit,
// echo5limit, fiberlimit, fiber3limit or grpclimit. Key functions (client
// IP behind trusted proxies, a verified JWT's user, a hashed API key) are
// in package keyfuncs.
//
// The Limiter keeps deciding when its store cannot: every store call has a
// deadline ([WithTimeout]), a [FailurePolicy] decides when a call fails
// ([WithFailurePolicy]; by default each replica counts locally), and a
// circuit breaker ([WithBreaker]) stops calling a store that keeps
// failing until a probe finds it back.
//
// What a store must do is the [Store] contract, with [QuotaStore] for
// peeks, refunds, resets and per-identity overrides; package core/storetest
// proves a store against it, and package core/adapter holds what adapter
// authors need.
package core
