package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
)

// TestFixedManyTwin runs random batches of one-key calls, keys repeated,
// through fixed_many.lua on one set of keys and the same calls one by one
// through fixed_single.lua on a twin set, on a real redis-server in one
// instant of its clock's windows (an hour's limit): every reply and every
// key's count must agree, denials, costs above the rate, old hashes and
// other types included.
func TestFixedManyTwin(t *testing.T) {
	c := redistest.StartServer(t).Client(t)
	ctx := context.Background()
	limit := core.Limit{Rate: 7, Period: time.Hour, Algorithm: core.FixedWindow}
	single := redis.NewScript(singleSource(limit))
	many := redis.NewScript(manySource(limit))
	rng := rand.New(rand.NewPCG(3, 4))
	w := time.Now().UnixMilli() / limit.Period.Milliseconds()
	for round := range 40 {
		var a, b [4]string
		for i := range a {
			a[i] = fmt.Sprintf("fm:%d:%d:{a}", round, i)
			b[i] = fmt.Sprintf("fm:%d:%d:{b}", round, i)
			switch rng.IntN(4) {
			case 0: // an earlier version's hash, of this window
				n := rng.IntN(9)
				for _, k := range []string{a[i], b[i]} {
					c.HSet(ctx, k, "w", w, "c", n)
				}
			case 1: // another algorithm's
				for _, k := range []string{a[i], b[i]} {
					c.Set(ctx, k, "123:456", time.Minute)
				}
			}
		}
		for range 3 {
			var keysA, keysB []string
			var costs []any
			for range 1 + rng.IntN(6) {
				i := rng.IntN(len(a))
				keysA, keysB = append(keysA, a[i]), append(keysB, b[i])
				costs = append(costs, 1+rng.IntN(9))
			}
			got, err := many.Run(ctx, c, keysA, costs...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			for j, k := range keysB {
				want, err := single.Run(ctx, c, []string{k}, costs[j]).Int64()
				if err != nil {
					t.Fatal(err)
				}
				// the ms left may differ by the time between the calls;
				// a different count differs by a multiple of the period
				if d := got[j] - want; d < -1000 || d > 1000 || got[j] == 0 || (got[j] < 0) != (want < 0) {
					t.Fatalf("round %d, call %d (%s, cost %v): many %d, single %d", round, j, k, costs[j], got[j], want)
				}
			}
		}
		for i := range a {
			va, _ := c.Get(ctx, a[i]).Result()
			vb, _ := c.Get(ctx, b[i]).Result()
			if va != vb {
				t.Fatalf("round %d, key %d: many left %q, single %q", round, i, va, vb)
			}
		}
	}
}
