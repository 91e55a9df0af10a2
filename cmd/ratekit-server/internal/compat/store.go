// Package compat counts limits as envoyproxy/ratelimit counts them, in one
// atomic Lua script on Redis's clock: a fixed window aligned to Unix time
// per key, every hit added to it, over the limit or not.
//
// The library's own fixed window gives a denied request's units back, so
// that a client past its limit spends nothing; envoy keeps counting them,
// which shows in its answers after a limit is raised, when one descriptor
// is sent with several limits, and in its statistics. [Store] is a
// [core.Store] that keeps envoy's counting, so that a [core.Limiter] (its
// deadline, circuit breaker and local fallback) runs over it unchanged.
package compat

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/pipebatch"
	"github.com/ratekit/ratekit/redisstore"
)

//go:embed compat.lua
var source string

var script = redis.NewScript(source)

// Client is what the store needs of a go-redis client: a *redis.Client, a
// *redis.ClusterClient or a failover client. Scripts go out through
// Process, so the client's hooks run as for any command.
type Client interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Store is a [core.Store] and [core.QuotaStore] whose every call runs
// compat.lua: each check's key is a counter of the current window of its
// limit's period, aligned to Unix time on Redis's clock, and every call
// adds its units to it whether the limit allows them or not.
//
// Results differ from the library's fixed window in one way: Allowed
// reports whether the count after the call is within the limit, as envoy
// decides, and nothing is given back for a denial. A call of n units
// above the limit is counted too (its RetryAfter is -1). Several checks in
// one call are counted each apart, or, when the context carries
// [WithStop], as envoy's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT counts
// them.
type Store struct {
	client  Client
	cluster *redis.ClusterClient
	batch   *pipebatch.Batcher // nil without batching
	routed  atomic.Bool
	reload  atomic.Int64
	born    time.Time
	watch   func(fn func(key string)) (stop func(), err error)
}

// Options tune a Store.
type Options struct {
	// Batch, when above 0, lets concurrent calls over a *redis.Client
	// share pipelined round trips, up to that many in flight, the calls of
	// one round trip in one script run (see package pipebatch); 0 sends
	// each call alone.
	Batch int
	// Watch, when set, is the watch of the resets published on
	// redisstore.ResetChannel (a redisstore.Store's WatchResets over the
	// same Redis), which WatchResets hands on: Reset publishes there, so
	// every replica's Limiter forgets a reset key. Nil: WatchResets fails
	// with core.ErrNotSupported.
	Watch func(fn func(key string)) (stop func(), err error)
}

// New returns a Store over client.
func New(client Client, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("compat: nil client")
	}
	s := &Store{client: client, born: time.Now(), watch: opts.Watch}
	s.cluster, _ = client.(*redis.ClusterClient)
	if c, ok := client.(*redis.Client); ok && opts.Batch > 0 {
		s.batch = pipebatch.New(c, opts.Batch)
	}
	return s, nil
}

// Close stops the batcher: calls queued fail, later calls go alone.
func (s *Store) Close() error {
	if s.batch != nil {
		s.batch.Close()
	}
	return nil
}

// Traits tells the Limiter that calls keep their deadline over a client
// with ContextTimeoutEnabled, and names each key's Cluster master.
func (s *Store) Traits() core.Traits {
	var keeps bool
	switch c := s.client.(type) {
	case *redis.Client:
		keeps = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		keeps = c.Options().ContextTimeoutEnabled
	}
	t := core.Traits{KeepsDeadlines: keeps}
	if s.cluster != nil {
		t.Shard = s.shard
	}
	return t
}

func (s *Store) shard(key string) string {
	if !s.routed.Load() {
		return ""
	}
	c, err := s.cluster.MasterForKey(context.Background(), key)
	if err != nil {
		return ""
	}
	return c.Options().Addr
}

// Call is what the caller of one store call through a Limiter tells the
// store and learns from it, carried by the call's context ([With]): the
// Limiter passes context values through to its store.
type Call struct {
	// Stop, with Hits, counts the call as envoy's
	// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT counts a request's
	// descriptors: when one would go over its limit, only those that would
	// go over are counted. Hits replace the call's cost, per check; a hit
	// count may be 0, to read a key without counting.
	Stop bool
	Hits []int64
	// Counts receives each check's count after the call, and Answered
	// whether the store filled it (not when the Limiter's fallback
	// decided).
	Counts   []int64
	Answered bool
}

type callKey struct{}

// With returns ctx carrying c to the store's next call.
func With(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// AllowAllN counts n units on every check's key (see [Store]).
func (s *Store) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	c, _ := ctx.Value(callKey{}).(*Call)
	var hits []int64
	stop := false
	if c != nil && c.Stop && len(c.Hits) == len(checks) {
		hits, stop = c.Hits, true
	}
	res, counts, err := s.run(ctx, checks, int64(n), hits, stop)
	if err == nil && c != nil {
		c.Counts, c.Answered = counts, true
	}
	return res, err
}

// PeekAll reads each check's count without adding to it: Allowed reports
// whether the count is within the limit, as envoy answers a descriptor
// whose hits_addend is 0.
func (s *Store) PeekAll(ctx context.Context, checks []core.Check) ([]core.Result, error) {
	res, counts, err := s.run(ctx, checks, 0, nil, false)
	if c, _ := ctx.Value(callKey{}).(*Call); err == nil && c != nil {
		c.Counts, c.Answered = counts, true
	}
	return res, err
}

// RefundAllN takes n units off each check's count, down to 0.
func (s *Store) RefundAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	for _, c := range checks {
		err := refund.Run(ctx, s.client, []string{c.Key}, n).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			s.failed(err)
			return nil, fmt.Errorf("compat: refund: %w", err)
		}
	}
	return s.PeekAll(ctx, checks)
}

var refund = redis.NewScript(`
local c = tonumber(redis.pcall('GET', KEYS[1]))
if not c then return 0 end
local left = c - tonumber(ARGV[1])
if left <= 0 then redis.call('DEL', KEYS[1]) return 0 end
redis.call('DECRBY', KEYS[1], ARGV[1])
return left`)

// resetScript deletes a counter and publishes its key on the reset
// channel, in one step. KEYS[1]: the key. ARGV[1]: the channel.
var resetScript = redis.NewScript(`redis.call('DEL', KEYS[1]) return redis.call('PUBLISH', ARGV[1], KEYS[1])`)

// Reset deletes each key's counter and publishes it on
// redisstore.ResetChannel, so that every replica watching forgets it.
func (s *Store) Reset(ctx context.Context, keys ...string) error {
	for _, k := range keys {
		if err := resetScript.Run(ctx, s.client, []string{k}, redisstore.ResetChannel).Err(); err != nil {
			s.failed(err)
			return fmt.Errorf("compat: reset: %w", err)
		}
	}
	return nil
}

// SetOverride is not supported: envoy's counting has no per-identity
// overrides (a descriptor's own limit comes with its request).
func (s *Store) SetOverride(context.Context, string, string, core.Limit, time.Duration) error {
	return fmt.Errorf("%w: compat: overrides", core.ErrNotSupported)
}

// ClearOverride is not supported, as SetOverride.
func (s *Store) ClearOverride(context.Context, string, string) error {
	return fmt.Errorf("%w: compat: overrides", core.ErrNotSupported)
}

// WatchResets hands fn to the watch of Options.Watch.
func (s *Store) WatchResets(fn func(key string)) (stop func(), err error) {
	if s.watch == nil {
		return nil, fmt.Errorf("%w: compat: no reset watch", core.ErrNotSupported)
	}
	return s.watch(fn)
}

var (
	scriptSHA = script.Hash()
	boxedMode = map[bool]any{false: "0", true: "1"}
	// boxed holds the boxed arguments of the limits seen, so that a call
	// boxes none; client-chosen limits (a descriptor's own) may be many,
	// and past boxedMax are boxed per call.
	boxed  sync.Map // limitKey → *[2]any
	nboxed atomic.Int32
)

const boxedMax = 1024

type limitKey struct {
	rate int
	ms   int64
}

func boxedLimit(l core.Limit) *[2]any {
	k := limitKey{l.Rate, l.Period.Milliseconds()}
	if v, ok := boxed.Load(k); ok {
		return v.(*[2]any)
	}
	v := &[2]any{k.rate, k.ms}
	if nboxed.Load() < boxedMax {
		if _, loaded := boxed.LoadOrStore(k, v); !loaded {
			nboxed.Add(1)
		}
	}
	return v
}

// maxHits is the largest count of one call: counts stay exact integers in
// Lua's doubles.
const maxHits = 1 << 52

func (s *Store) run(ctx context.Context, checks []core.Check, n int64, hits []int64, stop bool) ([]core.Result, []int64, error) {
	if len(checks) == 0 || len(checks) > 64 {
		return nil, nil, fmt.Errorf("compat: %d checks in one call", len(checks))
	}
	// EVALSHA sha numkeys key... mode (limit window hits)...
	args := make([]any, 0, 4+4*len(checks))
	args = append(args, "evalsha", scriptSHA, len(checks))
	for _, c := range checks {
		args = append(args, c.Key)
	}
	args = append(args, boxedMode[stop])
	for i, c := range checks {
		h := n
		if hits != nil {
			h = hits[i]
		}
		if h < 0 || h > maxHits {
			return nil, nil, fmt.Errorf("compat: %d hits in one call", h)
		}
		lim := boxedLimit(c.Limit)
		args = append(args, lim[0], lim[1], h)
	}
	var (
		reply []int64
		err   error
	)
	if s.batch != nil {
		reply, err = s.batch.Do(ctx, source, args)
	} else {
		reply, err = pipebatch.Run(ctx, s.client, source, args)
	}
	if err != nil {
		s.failed(err)
		return nil, nil, err
	}
	if s.cluster != nil {
		s.routed.Store(true)
	}
	return results(checks, n, hits, reply)
}

// results reads the script's reply: per check, the count after the call
// and the ms left in its window.
func results(checks []core.Check, n int64, hits []int64, reply []int64) ([]core.Result, []int64, error) {
	if len(reply) != 2*len(checks) {
		return nil, nil, fmt.Errorf("%w: compat: %d integers for %d checks", core.ErrMalformedReply, len(reply), len(checks))
	}
	out := make([]core.Result, len(checks))
	counts := make([]int64, len(checks))
	for i, c := range checks {
		count, left := reply[2*i], reply[2*i+1]
		counts[i] = count
		if count < 0 || left < 0 || left > c.Limit.Period.Milliseconds() {
			return nil, nil, fmt.Errorf("%w: compat: count %d, %d ms left of %v", core.ErrMalformedReply, count, left, c.Limit.Period)
		}
		h := n
		if hits != nil {
			h = hits[i]
		}
		rate := int64(c.Limit.Rate)
		wait := time.Duration(left) * time.Millisecond
		r := core.Result{Limit: c.Limit, Allowed: count <= rate, ResetAfter: wait}
		if r.Allowed {
			r.Remaining = int(rate - count)
		} else {
			r.RetryAfter = wait
			if h > rate {
				r.RetryAfter = -1
			}
		}
		out[i] = r
	}
	return out, counts, nil
}

// failed asks a Cluster client to reload its slot map after a call failed
// for a reason of the network or a server, at most every 100 ms: go-redis
// would send a dead master's slots to it for up to a minute.
func (s *Store) failed(err error) {
	if s.cluster == nil || errors.Is(err, context.Canceled) {
		return
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !redis.HasErrorPrefix(err, "CLUSTERDOWN") && !redis.HasErrorPrefix(err, "LOADING") {
		return
	}
	now := int64(time.Since(s.born))
	last := s.reload.Load()
	if last != 0 && now-last < int64(100*time.Millisecond) || !s.reload.CompareAndSwap(last, now) {
		return
	}
	s.cluster.ReloadState(context.Background())
}

var _ core.QuotaStore = (*Store)(nil)
