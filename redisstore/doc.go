// Package redisstore is a [core.Store] that keeps limits in Redis and
// decides each call with one atomic Lua script that reads Redis's own
// clock, so any number of processes sharing one Redis share one limit
// exactly: a server, a Cluster, a Ring, or a master behind Sentinel,
// through any go-redis v9 client.
//
// Over a *redis.Client, concurrent calls share pipelined round trips
// ([WithBatching]); each distinct limit gets a script of its own with the
// limit compiled in. The store implements [core.QuotaStore]: peek, refund,
// reset and per-identity overrides, with resets told to every process
// through Redis pub/sub on [ResetChannel].
//
// The scripts (scripts/*.lua) each open with a comment that lists their
// KEYS, ARGV and reply; docs/ARCHITECTURE.md maps the key schema.
package redisstore
