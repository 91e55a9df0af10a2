package redisstore

import (
	"errors"
	"fmt"
	"time"
)

// ResetChannel is the Redis pub/sub channel on which a [Store] publishes
// the keys it resets, and those whose override it sets or clears, one
// message a key.
const ResetChannel = "ratekit:resets"

// Option configures a [Store].
type Option func(*config) error

type config struct {
	batching   *Batching // WithBatching's; nil for the defaults
	noBatching bool      // WithoutBatching
}

// Batching configures how a [Store] coalesces concurrent calls into
// pipelines ([WithBatching]), which it does by default over a
// *redis.Client as a zero Batching does. A zero field takes its default.
type Batching struct {
	// MaxBatch is the most calls one pipeline carries: 128 by default, at
	// most 1024.
	MaxBatch int
	// Parallel is the most pipelines in flight at once: 8 by default, at
	// most 64. Two open whenever calls are waiting; each further one opens
	// only for at least a quarter of the calls in flight or queued, and only
	// while the pipelines' round trips stay within twice the shortest seen
	// lately (a pipeline beyond the first two that returns passes its slot
	// on likewise, or frees it). More pipelines in flight hide a network's
	// latency (across a link, round trips stay near the shortest, and up to
	// Parallel open as the crowd fills them), but once Redis or this
	// process is saturated, round trips grow with the queue and more
	// pipelines would only split the calls into shorter ones, each costing
	// both sides a round trip's system calls and Redis a script call. So a
	// low Parallel caps a moderate crowd across a network below what
	// unbatched calls would reach, while on a saturated machine the round
	// trips keep the pipelines few whatever Parallel allows (on loopback,
	// 256 callers on one key: 9.9× the rate of a bare script with the
	// round trips heeded, 7.1× with all 8 opening whenever a slot was
	// free; docs/measurements.md). Calls that find no pipeline they may
	// open wait for one to return. Peeks and refunds ([Store.PeekAll],
	// [Store.RefundAllN]) have Parallel pipelines of their own, so that
	// they never hold one that a decision waits for.
	Parallel int
	// MaxWait holds each pipeline open up to that long for more calls,
	// trading latency for fewer round trips; 0 (the default) sends at once.
	MaxWait time.Duration
}

// Batching bounds.
const (
	defaultMaxBatch = 128
	maxMaxBatch     = 1024
	defaultParallel = 8
	maxParallel     = 64
)

// WithBatching configures how a [Store] coalesces concurrent decisions of
// one process into pipelined round trips, which it does by default over a
// *redis.Client as with a zero Batching ([WithoutBatching] turns it off;
// over a Cluster or Ring client it is off unless asked for, see [New]):
// calls that arrive while a pipeline is in flight share the next one, up
// to b.MaxBatch calls a pipeline and b.Parallel pipelines in flight at
// once. A lone caller goes out at once, on its own goroutine, so batching
// adds no wait of its own unless b.MaxWait asks for one.
//
// One-key calls of one limit that share a pipeline are decided by one
// script call, in the order they queued, as if each had run alone at the
// same instant: Redis pays a script's fixed cost and reads its clock once
// for all of them, and reads and writes a key that several of them name
// once (a fixed window's counter takes an INCRBY a call). That holds for
// every algorithm but a fixed window whose rate + 1 times its period in ms
// reaches 2^53; sliding-log calls share a script call only with calls of
// the same key, up to core.MaxLogCost units together, so that no script
// call takes longer in Redis than one call may. Calls of several limits
// (of one identity, decided all or nothing) share a script call likewise
// with others of the same algorithms, each reading what the ones before it
// wrote, unless one of their limits is a sliding log. Through a
// *redis.Client (one server, or a Sentinel-watched master) any keys share
// a script call; through a Cluster or Ring client, only keys with one
// hash tag (one identity's keys) do. Other calls (those naming an override
// key, and those above) go in the pipeline one command each.
//
// When many goroutines decide at once (dozens or more in flight), the
// same Redis serves several times the decisions per second; a single
// goroutine loses nothing measurable (docs/benchmarks.md). WithBatching
// needs a client with a Pipeline method (*redis.Client,
// *redis.ClusterClient and *redis.Ring have one). A Cluster pipeline is
// split by node, and returns when every node answered. Commands answered
// NOSCRIPT are sent again by EVAL. Call [Store.Close] when done: it fails
// calls still queued with core.ErrClosed and waits for pipelines in
// flight.
func WithBatching(b Batching) Option {
	return func(c *config) error {
		switch {
		case c.noBatching:
			return errors.New("ratekit: redisstore: WithBatching with WithoutBatching")
		case b.MaxBatch < 0 || b.MaxBatch > maxMaxBatch:
			return fmt.Errorf("ratekit: redisstore.WithBatching: MaxBatch %d (want 1 to %d, or 0 for %d)", b.MaxBatch, maxMaxBatch, defaultMaxBatch)
		case b.Parallel < 0 || b.Parallel > maxParallel:
			return fmt.Errorf("ratekit: redisstore.WithBatching: Parallel %d (want 1 to %d, or 0 for %d)", b.Parallel, maxParallel, defaultParallel)
		case b.MaxWait < 0:
			return fmt.Errorf("ratekit: redisstore.WithBatching: MaxWait %v is negative", b.MaxWait)
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

// WithoutBatching makes a [Store] send each call as a command of its own,
// on the caller's goroutine, instead of pipelining concurrent calls
// ([WithBatching], the default). Each call then takes a pooled connection
// of its own: use it to compare, or where a proxy in front of Redis
// handles pipelines badly.
func WithoutBatching() Option {
	return func(c *config) error {
		if c.batching != nil {
			return errors.New("ratekit: redisstore: WithoutBatching with WithBatching")
		}
		c.noBatching = true
		return nil
	}
}
