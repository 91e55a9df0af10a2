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

// TestDecideManyTwin runs random batches of calls of one to three limits
// each, through decide_many.lua on one set of keys and one by one through
// decide.lua on a twin set, over miniredis on one clock that stands still
// during each batch, as Redis's does during a script: every reply, and
// every key's state and expiry, must agree. Calls mix the four algorithms
// (in the script of all four, and in GCRA's alone), share keys with the
// calls before them, cost up to past their rates, and some are denied by
// one limit while others allow, so that nothing is spent; the clock moves
// between batches.
func TestDecideManyTwin(t *testing.T) {
	c, _, advance := frozenRedis(t)
	ctx := context.Background()
	mixed := []core.Limit{
		core.PerSecond(5), core.PerSecond(7).WithBurst(3),
		core.PerSecond(6).WithAlgorithm(core.FixedWindow),
		core.PerSecond(8).WithAlgorithm(core.SlidingWindowLog),
		core.PerSecond(9).WithAlgorithm(core.SlidingWindowCounter),
	}
	for _, tc := range []struct {
		name   string
		algs   []core.Algorithm
		limits []core.Limit
	}{
		{"mixed", []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter}, mixed},
		{"gcra", []core.Algorithm{core.GCRA}, mixed[:2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			single := redis.NewScript(scriptSource(tc.algs...))
			many := redis.NewScript(manyDecideSource(tc.algs...))
			rng := rand.New(rand.NewPCG(9, 10))
			spent, denied := 0, 0
			for round := range 40 {
				// two identities' keys, one per limit
				key := func(side string, id, l int) string {
					return fmt.Sprintf("dm:%s:%d:%d:{%s%d}", tc.name, round, l, side, id)
				}
				for batch := range 4 {
					var keysA []string
					var argsA []any
					var calls [][]string // each call's keys on side b
					var callArgs [][]any
					for range 2 + rng.IntN(6) {
						id, n := rng.IntN(2), 1+rng.IntN(4)
						ls := rng.Perm(len(tc.limits))[:1+rng.IntN(min(3, len(tc.limits)))]
						args := []any{n}
						var kb []string
						for _, l := range ls {
							keysA = append(keysA, key("a", id, l))
							kb = append(kb, key("b", id, l))
							a := limitArgs(tc.limits[l])
							args = append(args, a[:]...)
						}
						argsA = append(argsA, len(ls))
						argsA = append(argsA, args...)
						calls, callArgs = append(calls, kb), append(callArgs, args)
					}
					got, err := many.Run(ctx, c, keysA, argsA...).StringSlice()
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != len(calls) {
						t.Fatalf("round %d, batch %d: %d replies for %d calls", round, batch, len(got), len(calls))
					}
					for j, kb := range calls {
						want, err := single.Run(ctx, c, kb, callArgs[j]...).Text()
						if err != nil {
							t.Fatal(err)
						}
						if got[j] != want {
							t.Fatalf("round %d, batch %d, call %d (%v, args %v): many %q, single %q", round, batch, j, kb, callArgs[j], got[j], want)
						}
						if want[0] == '1' {
							spent++
						} else {
							denied++
						}
					}
					for l := range tc.limits {
						for id := range 2 {
							if a, b := keyState(t, c, key("a", id, l)), keyState(t, c, key("b", id, l)); a != b {
								t.Fatalf("round %d, batch %d, limit %v, identity %d: many left %s, single %s", round, batch, tc.limits[l], id, a, b)
							}
						}
					}
					advance(time.Duration(rng.Int64N(400)) * time.Millisecond)
				}
			}
			if spent < 100 || denied < 100 {
				t.Fatalf("fixture: %d calls allowed and %d denied, want both of at least 100", spent, denied)
			}
		})
	}
}
