package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// frozenRedis starts a miniredis whose clock stands still, as Redis's does
// during a script, until advance moves it, and returns a client of it and
// the clock's reading (a whole second and 535,897 µs into a minute).
func frozenRedis(t *testing.T) (c *redis.Client, now func() time.Time, advance func(time.Duration)) {
	t.Helper()
	m := miniredis.RunT(t)
	at := time.Date(2026, 3, 14, 15, 9, 26, 535_897_000, time.UTC)
	m.SetTime(at)
	c = redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return c, func() time.Time { return at }, func(d time.Duration) {
		at = at.Add(d)
		m.SetTime(at)
		m.FastForward(d)
	}
}

// oneKeyTwinBatch runs one random batch of one-key calls, keys repeated,
// through many on keys of a and the same calls one by one through single
// on the twin keys of b, at costs of 1 (sent as a batching store sends
// them: no ARGV) or up to 11, and fails t unless every reply, and every
// key's state and expiry, agree. at names the batch in messages.
func oneKeyTwinBatch(t *testing.T, c *redis.Client, rng *rand.Rand, many, single *redis.Script, a, b []string, at string) {
	t.Helper()
	ctx := context.Background()
	var keysA, keysB []string
	var costs []any
	allOne := rng.IntN(2) == 0
	for range 2 + rng.IntN(7) {
		i := rng.IntN(len(a))
		keysA, keysB = append(keysA, a[i]), append(keysB, b[i])
		if allOne {
			costs = append(costs, 1)
		} else {
			costs = append(costs, 1+rng.IntN(11))
		}
	}
	var args []any
	if !allOne {
		args = costs
	}
	got, err := many.Run(ctx, c, keysA, args...).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keysA) {
		t.Fatalf("%s: %d replies for %d calls", at, len(got), len(keysA))
	}
	for j, k := range keysB {
		var args []any
		if !allOne {
			args = []any{costs[j]}
		}
		want, err := single.Run(ctx, c, []string{k}, args...).Text()
		if err != nil {
			t.Fatal(err)
		}
		if got[j] != want {
			t.Fatalf("%s, call %d (%s, cost %v): many %q, single %q", at, j, k, costs[j], got[j], want)
		}
	}
	for i := range a {
		if sa, sb := keyState(t, c, a[i]), keyState(t, c, b[i]); sa != sb {
			t.Fatalf("%s, key %d: many left %s, single %s", at, i, sa, sb)
		}
	}
}

// keyState describes what key holds, whatever its type, and its expiry.
func keyState(t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	ctx := context.Background()
	ttl, err := c.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	switch typ := c.Type(ctx, key).Val(); typ {
	case "none":
	case "string":
		v = c.Get(ctx, key).Val()
	case "hash":
		v = c.HGetAll(ctx, key).Val()
	case "zset":
		v = c.ZRangeWithScores(ctx, key, 0, -1).Val()
	default:
		t.Fatalf("%s: type %s", key, typ)
	}
	return fmt.Sprintf("%v (PTTL %v)", v, ttl)
}
