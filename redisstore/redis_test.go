package redisstore_test

import (
	"context"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
)

// TestRedisStoreNoScript flushes the server's script cache before calls of
// every kind (one key of each algorithm, several keys of one and of mixed
// algorithms): EVALSHAs answered NOSCRIPT go again by EVAL, through a
// go-redis client and through a client that only runs scripts, and each
// store still decides like a memorystore.Store on a fresh key.
func TestRedisStoreNoScript(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	ctx := context.Background()
	stores := map[string]core.Store{
		"client":        testkit.MustRedis(c),
		"scripter-only": testkit.MustRedis(testkit.ScripterOnly{Scripter: c}),
	}
	limit := core.PerHour(10).WithBurst(4)
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			var calls [][]core.Check
			for _, alg := range testkit.Algorithms {
				calls = append(calls, []core.Check{{Key: testkit.UniqueKey(t, "ns-"+alg.String()), Limit: limit.WithAlgorithm(alg)}})
			}
			id := testkit.UniqueKey(t, "ns-multi")
			calls = append(calls,
				[]core.Check{{Key: id + "a", Limit: limit}, {Key: id + "b", Limit: limit.WithBurst(2)}},
				[]core.Check{{Key: id + "c", Limit: limit}, {Key: id + "d", Limit: limit.WithAlgorithm(core.FixedWindow)}})
			mem := testkit.MustMemory()
			defer mem.Close()
			for round := range 3 {
				for i, checks := range calls {
					if err := c.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
					got, err := s.AllowAllN(ctx, checks, 1+round)
					if err != nil {
						t.Fatalf("round %d, call %d: %v", round, i, err)
					}
					want, _ := mem.AllowAllN(ctx, checks, 1+round)
					for j := range got {
						if got[j].Allowed != want[j].Allowed || got[j].Remaining != want[j].Remaining ||
							(got[j].RetryAfter < 0) != (want[j].RetryAfter < 0) {
							t.Fatalf("round %d, call %d, check %d: redis %+v, memory %+v", round, i, j, got[j], want[j])
						}
					}
				}
			}
		})
	}
}
