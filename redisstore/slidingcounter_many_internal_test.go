package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
)

// TestSlidingCounterManyTwin runs random batches of one-key calls, keys
// repeated, through slidingcounter_many.lua on one set of keys and the same
// calls one by one through slidingcounter_single.lua on a twin set, over
// miniredis on one clock that stands still during each batch, as Redis's
// does during a script: every reply, every key's fields and every expiry
// must agree. The keys start absent, counting this window or the one
// before, as an earlier version's fixed-window hash, or of another type;
// costs run past the rate; the clock moves by up to a period between
// batches, so that the previous window's count weighs in and windows turn.
func TestSlidingCounterManyTwin(t *testing.T) {
	c, now, advance := frozenRedis(t)
	ctx := context.Background()
	limit := core.Limit{Rate: 9, Period: time.Second, Burst: 9, Algorithm: core.SlidingWindowCounter}
	single := redis.NewScript(singleSource(limit))
	many := redis.NewScript(manySource(limit))
	rng := rand.New(rand.NewPCG(5, 6))
	window := func() int64 { return now().UnixMicro() / limit.Period.Microseconds() }
	kinds := map[string]int{}
	for round := range 60 {
		var a, b [4]string
		for i := range a {
			a[i] = fmt.Sprintf("scm:%d:%d:{a}", round, i)
			b[i] = fmt.Sprintf("scm:%d:%d:{b}", round, i)
			kind := rng.IntN(5)
			kinds[[]string{"absent", "this window", "the window before", "an old hash", "another type"}[kind]]++
			sc, sp := rng.IntN(9), rng.IntN(9)
			for _, k := range []string{a[i], b[i]} {
				switch kind {
				case 1, 2:
					c.HSet(ctx, k, "sw", window()-int64(kind-1), "sc", sc, "sp", sp)
					c.PExpire(ctx, k, 2*limit.Period)
				case 3:
					c.HSet(ctx, k, "w", window(), "c", sc)
					c.PExpire(ctx, k, limit.Period)
				case 4:
					c.Set(ctx, k, "123:456", time.Minute)
				}
			}
		}
		for batch := range 3 {
			oneKeyTwinBatch(t, c, rng, many, single, a[:], b[:], fmt.Sprintf("round %d, batch %d", round, batch))
			advance(time.Duration(rng.Int64N(int64(limit.Period/time.Millisecond))) * time.Millisecond)
		}
	}
	for _, k := range []string{"absent", "this window", "the window before", "an old hash", "another type"} {
		if kinds[k] == 0 {
			t.Fatalf("fixture: no key started %s", k)
		}
	}
}
