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

// TestSlidingLogManyTwin runs random batches of one-key calls, keys
// repeated, through slidinglog_many.lua on one set of keys and the same
// calls one by one through single.lua over slidinglog.lua on a twin set,
// over miniredis on one clock that stands still during each batch, as
// Redis's does during a script: every reply, every set's members and
// scores, and every expiry must agree. The keys start absent, with members
// in the window, past it (to be trimmed) or of this very instant, or of
// another type; costs run past the rate; the clock moves by up to a period
// between batches.
func TestSlidingLogManyTwin(t *testing.T) {
	c, now, advance := frozenRedis(t)
	ctx := context.Background()
	limit := core.Limit{Rate: 9, Period: time.Second, Burst: 9, Algorithm: core.SlidingWindowLog}
	single := redis.NewScript(singleSource(limit))
	many := redis.NewScript(manySource(limit))
	rng := rand.New(rand.NewPCG(7, 8))
	kindNames := []string{"absent", "members in the window", "members of this instant", "members past the window", "another type"}
	kinds := map[string]int{}
	for round := range 120 {
		var a, b [4]string
		for i := range a {
			a[i] = fmt.Sprintf("slm:%d:%d:{a}", round, i)
			b[i] = fmt.Sprintf("slm:%d:%d:{b}", round, i)
			kind := rng.IntN(len(kindNames))
			kinds[kindNames[kind]]++
			var members []redis.Z
			us := now().UnixMicro()
			for j := range 1 + rng.IntN(9) {
				var at int64
				switch kind {
				case 1:
					at = us - rng.Int64N(limit.Period.Microseconds())
				case 2:
					at = us
				case 3:
					at = us - limit.Period.Microseconds() - rng.Int64N(1000)
				}
				members = append(members, redis.Z{Score: float64(at), Member: fmt.Sprintf("%d-%05d", at, j+1)})
			}
			for _, k := range []string{a[i], b[i]} {
				switch kind {
				case 1, 2, 3:
					c.ZAdd(ctx, k, members...)
					c.PExpire(ctx, k, limit.Period)
				case 4:
					c.Set(ctx, k, "123:456", time.Minute)
				}
			}
		}
		for batch := range 3 {
			oneKeyTwinBatch(t, c, rng, many, single, a[:], b[:], fmt.Sprintf("round %d, batch %d", round, batch))
			advance(time.Duration(rng.Int64N(limit.Period.Microseconds())) * time.Microsecond)
		}
	}
	for _, k := range kindNames {
		if kinds[k] == 0 {
			t.Fatalf("fixture: no key started with %s", k)
		}
	}
}
