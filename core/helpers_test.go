package core

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Test helpers, exported so that the external tests (package core_test)
// see them too; they exist only in test builds.

// NewRedisStore is redisstore.New, which an internal test cannot import
// (package redisstore imports core): hooks_test.go, of the external test
// package, sets it before the tests run.
var NewRedisStore func(client redis.Scripter) Store

// decideGroup decides one group of checks at cost n into results, as
// Check does for each group, and reports whether the denied-key cache
// answered.
func (l *Limiter) decideGroup(ctx context.Context, checks []Check, n int, results []Result) (cached bool, err error) {
	c := groupCall{checks: checks, n: n, results: results}
	_, err = l.decide(ctx, &c)
	return c.cached, err
}

// Redact returns the redacted form of an identity, as the debug log writes
// it.
func Redact(identity string) string { return redacted(identity).String() }

// BreakerState returns the state of the Limiter's circuit breaker, as
// OnBreakerChange and observers hear of it.
func (l *Limiter) BreakerState() BreakerState { return l.brk.current() }

// StorageKey returns the storage key of identity under the named rule.
func (l *Limiter) StorageKey(rule, identity string) (string, error) {
	return l.storageKey(rule, identity)
}
