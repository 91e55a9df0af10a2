package core

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisStore is a [Store] that keeps limits in Redis and decides each call
// with one atomic Lua script that reads Redis's own clock, so any number of
// processes sharing one Redis share one limit exactly. It is safe for
// concurrent use.
type RedisStore struct {
	client redis.Scripter
	// limits caches, per distinct Limit, its compiled single-key script and
	// its boxed arguments for the multi-key scripts.
	limits  sync.Map // Limit → *limitScripts
	nlimits atomic.Int32
	batch   *batcher // nil unless WithBatching
}

// RedisOption configures a [RedisStore].
type RedisOption func(*redisConfig)

type redisConfig struct {
	batch    bool
	maxBatch int
	parallel int
	maxWait  time.Duration
}

// WithBatching coalesces concurrent decisions of one process into pipelined
// round trips: calls that arrive while a pipeline is in flight share the
// next one, up to maxBatch calls a pipeline and parallel pipelines in
// flight at once. A lone caller goes out at once, so batching adds no wait
// of its own; maxWait > 0 holds each pipeline open up to that long for more
// calls, trading latency for fewer round trips.
//
// Use it when many goroutines decide at once (dozens or more in flight):
// the same Redis then serves several times the decisions per second, since
// it parses one pipeline instead of many requests. With few concurrent
// callers it gains little. The client must have a Pipeline method
// (*redis.Client, *redis.ClusterClient and *redis.Ring do); a Cluster
// pipeline is split by node. Calls answered NOSCRIPT are sent again by EVAL.
// A batching store runs a goroutine: call [RedisStore.Close] to stop it.
//
// Defaults when zero: maxBatch 128, parallel 4.
func WithBatching(maxBatch, parallel int, maxWait time.Duration) RedisOption {
	return func(c *redisConfig) {
		c.batch, c.maxBatch, c.parallel, c.maxWait = true, maxBatch, parallel, maxWait
	}
}

// maxCompiledLimits bounds how many distinct limits get scripts of their
// own; calls with further limits run the generic scripts.
const maxCompiledLimits = 256

type limitScripts struct {
	single *redis.Script
	args   [4]any // algorithm, rate, period in ms, burst
}

// NewRedisStore returns a store over client: a *redis.Client,
// *redis.ClusterClient, *redis.Ring, a failover client, or anything else
// that runs scripts. The client's pool, TLS, timeouts and hooks apply
// unchanged; RedisStore never closes it.
//
// Scripts run by EVALSHA and fall back to EVAL when the server does not know
// them yet (after a restart or failover), so nothing needs loading first.
// Each distinct limit (up to 256 of them) gets a script of its own with the
// limit compiled in, so a call sends only the key and the cost.
//
// NewRedisStore panics on a nil client, or with [WithBatching] on a client
// without a Pipeline method: both are programming errors.
func NewRedisStore(client redis.Scripter, opts ...RedisOption) *RedisStore {
	if client == nil {
		panic("ratekit: NewRedisStore: nil client")
	}
	var cfg redisConfig
	for _, o := range opts {
		o(&cfg)
	}
	s := &RedisStore{client: client}
	if cfg.batch {
		p, ok := client.(pipeliner)
		if !ok {
			panic(fmt.Sprintf("ratekit: NewRedisStore: WithBatching needs a client with a Pipeline method, not %T", client))
		}
		if cfg.maxBatch < 1 {
			cfg.maxBatch = 128
		}
		if cfg.parallel < 1 {
			cfg.parallel = 4
		}
		s.batch = newBatcher(p, client, cfg.maxBatch, cfg.parallel, cfg.maxWait)
	}
	return s
}

// Close stops a batching store's goroutine and waits for pipelines in
// flight; later calls fail with [ErrClosed]. It never closes the client. A
// store without batching has nothing to close.
func (s *RedisStore) Close() error {
	if s.batch != nil {
		s.batch.close()
	}
	return nil
}

// Allow is shorthand for AllowN(ctx, key, limit, 1).
func (s *RedisStore) Allow(ctx context.Context, key string, limit Limit) (Result, error) {
	return s.AllowN(ctx, key, limit, 1)
}

// AllowN reports whether n units may be spent now under limit for key, and
// spends them if so. A cost above the limit's capacity is denied without
// spending anything, with RetryAfter -1 ([Result.Never]).
func (s *RedisStore) AllowN(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	var res [1]Result
	err := s.allow(ctx, []Check{{Key: key, Limit: limit}}, n, res[:])
	return res[0], err
}

// AllowAllN implements [Store.AllowAllN] in one script call.
func (s *RedisStore) AllowAllN(ctx context.Context, checks []Check, n int) ([]Result, error) {
	results := make([]Result, len(checks))
	if err := s.allow(ctx, checks, n, results); err != nil {
		return nil, err
	}
	return results, nil
}

// singleCall holds the arguments of a one-key call in one allocation.
type singleCall struct {
	keys [1]string
	args [1]any
}

func (s *RedisStore) allow(ctx context.Context, checks []Check, n int, results []Result) error {
	if err := validate(checks, n); err != nil {
		return err
	}
	var (
		reply string
		err   error
	)
	if ls := s.scripts(checks[0].Limit); len(checks) == 1 && ls.single != nil {
		if s.batch != nil {
			c := s.batch.call()
			c.keys[0], c.args[0] = checks[0].Key, n
			reply, err = s.batch.do(ctx, ls.single, c)
		} else {
			c := &singleCall{keys: [1]string{checks[0].Key}, args: [1]any{n}}
			reply, err = ls.single.Run(ctx, s.client, c.keys[:], c.args[:]...).Text()
		}
	} else {
		keys := make([]string, len(checks))
		args := make([]any, 1, 1+4*len(checks))
		args[0] = n
		for i := range checks {
			keys[i] = checks[i].Key
			args = append(args, s.scripts(checks[i].Limit).args[:]...)
		}
		if s.batch != nil {
			c := s.batch.call()
			c.many, c.margs = keys, args
			reply, err = s.batch.do(ctx, scriptFor(checks), c)
		} else {
			reply, err = scriptFor(checks).Run(ctx, s.client, keys, args...).Text()
		}
	}
	if err != nil {
		return fmt.Errorf("ratekit: redis: %w", err)
	}
	return parseReply(reply, checks, results)
}

// scripts returns the cached scripts and arguments of limit.
func (s *RedisStore) scripts(limit Limit) *limitScripts {
	if v, ok := s.limits.Load(limit); ok {
		return v.(*limitScripts)
	}
	ls := &limitScripts{args: [4]any{
		strconv.Itoa(int(limit.Algorithm)),
		strconv.Itoa(limit.Rate),
		strconv.FormatInt(limit.Period.Milliseconds(), 10),
		strconv.Itoa(limit.Burst),
	}}
	if s.nlimits.Add(1) > maxCompiledLimits {
		return ls // too many distinct limits: generic scripts, nothing cached
	}
	ls.single = redis.NewScript(singleSource(limit))
	v, _ := s.limits.LoadOrStore(limit, ls)
	return v.(*limitScripts)
}
