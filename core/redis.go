package core

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

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
func NewRedisStore(client redis.Scripter) *RedisStore {
	if client == nil {
		panic("ratekit: NewRedisStore: nil client")
	}
	return &RedisStore{client: client}
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
	var cmd *redis.Cmd
	if ls := s.scripts(checks[0].Limit); len(checks) == 1 && ls.single != nil {
		c := &singleCall{keys: [1]string{checks[0].Key}, args: [1]any{n}}
		cmd = ls.single.Run(ctx, s.client, c.keys[:], c.args[:]...)
	} else {
		keys := make([]string, len(checks))
		args := make([]any, 1, 1+4*len(checks))
		args[0] = n
		for i := range checks {
			keys[i] = checks[i].Key
			args = append(args, s.scripts(checks[i].Limit).args[:]...)
		}
		cmd = scriptFor(checks).Run(ctx, s.client, keys, args...)
	}
	reply, err := cmd.Text()
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
