package core

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// RedisStore is a [Store] that keeps limits in Redis and decides each call
// with one atomic Lua script that reads Redis's own clock, so any number of
// processes sharing one Redis share one limit exactly. It is safe for
// concurrent use.
type RedisStore struct {
	client redis.Scripter
	args   sync.Map // Limit → []any: the boxed script arguments of a limit
}

// NewRedisStore returns a store over client: a *redis.Client,
// *redis.ClusterClient, *redis.Ring, a failover client, or anything else
// that runs scripts. The client's pool, TLS, timeouts and hooks apply
// unchanged; RedisStore never closes it.
//
// Scripts run by EVALSHA and fall back to EVAL when the server does not know
// them yet (after a restart or failover), so nothing needs loading first.
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

func (s *RedisStore) allow(ctx context.Context, checks []Check, n int, results []Result) error {
	if err := validate(checks, n); err != nil {
		return err
	}
	keys := make([]string, len(checks))
	args := make([]any, 1, 1+4*len(checks))
	args[0] = n
	for i := range checks {
		keys[i] = checks[i].Key
		args = append(args, s.limitArgs(checks[i].Limit)...)
	}
	reply, err := decideScript.Run(ctx, s.client, keys, args...).Text()
	if err != nil {
		return fmt.Errorf("ratekit: redis: %w", err)
	}
	return parseReply(reply, checks, results)
}

// limitArgs returns the script arguments of limit, boxed once and reused.
func (s *RedisStore) limitArgs(limit Limit) []any {
	if v, ok := s.args.Load(limit); ok {
		return v.([]any)
	}
	a := []any{
		strconv.Itoa(int(limit.Algorithm)),
		strconv.Itoa(limit.Rate),
		strconv.FormatInt(limit.Period.Milliseconds(), 10),
		strconv.Itoa(limit.Burst),
	}
	s.args.Store(limit, a)
	return a
}
