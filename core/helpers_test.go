package core

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/storekey"
)

// Test helpers, exported so that the external tests (package core_test)
// see them too; they exist only in test builds.

// MustMemoryStore is NewMemoryStore for options a test knows to be valid.
func MustMemoryStore(opts ...Option) *MemoryStore {
	s, err := NewMemoryStore(opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// MustRedisStore is NewRedisStore for a client and options a test knows
// to be valid.
func MustRedisStore(client redis.Scripter, opts ...Option) *RedisStore {
	s, err := NewRedisStore(client, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// MustLeasingStore is NewLeasingStore for options a test knows to be
// valid.
func MustLeasingStore(inner Store, opts ...Option) *LeasingStore {
	s, err := NewLeasingStore(inner, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// AllowOne decides n units of one key with s.
func AllowOne(s Store, ctx context.Context, key string, limit Limit, n int) (Result, error) {
	res, err := s.AllowAllN(ctx, []Check{{Key: key, Limit: limit}}, n)
	if err != nil {
		return Result{}, err
	}
	if len(res) != 1 {
		return Result{}, fmt.Errorf("%d results for one check", len(res))
	}
	return res[0], nil
}

// decideGroup decides one group of checks at cost n into results, as
// Check does for each group, and reports whether the denied-key cache
// answered.
func (l *Limiter) decideGroup(ctx context.Context, checks []Check, n int, results []Result) (cached bool, err error) {
	c := groupCall{checks: checks, n: n, results: results}
	err = l.decide(ctx, &c)
	return c.cached, err
}

// KeyOf returns the storage key of identity under rule with prefix, as a
// Limiter with that prefix builds it.
func KeyOf(prefix, rule, identity string) (string, error) {
	if err := storekey.ValidateName("prefix", prefix, true); err != nil {
		return "", err
	}
	if err := storekey.ValidateName("rule name", rule, false); err != nil {
		return "", err
	}
	return storekey.Key(prefix, rule, identity)
}

// Redact returns the redacted form of an identity, as the debug log writes
// it.
func Redact(identity string) string { return redacted(identity).String() }
