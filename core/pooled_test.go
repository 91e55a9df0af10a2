package core_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// A decision's results are its own: the buffers a direct store call
// borrows go back to a pool, and a later decision, on this goroutine or
// another, must never change an earlier one.
func TestDecisionsOwnTheirResults(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.SetTime(testkit.Start)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	memory := testkit.MustMemory()
	t.Cleanup(func() { memory.Close() })
	stores := map[string]core.Store{"memory": memory, "redis, keeps deadlines": testkit.MustRedis(client, redisstore.WithoutBatching())}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			l := newLimiter(t, store, core.WithTimeout(5*time.Second)) // no decision of the test may go to the fallback
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					r := rule("api", core.PerHour(1000), fmt.Sprintf("user:%s-%d", name, g))
					var kept []core.Decision
					for range 50 {
						d, err := check(t, l, r)
						if err != nil {
							t.Error(err)
							return
						}
						kept = append(kept, d)
					}
					for i, d := range kept {
						if got, want := d.Results[0].Remaining, 999-i; got != want || d.Results[0].Rule != "api" {
							t.Errorf("decision %d of goroutine %d, read after the others: %+v, want %d remaining", i, g, d.Results[0], want)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
