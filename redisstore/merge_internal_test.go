package redisstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
)

// TestMergeBounds checks which calls of a pipeline merge share a script
// call: one-key calls of one limit whatever their keys, and calls of
// several limits of one set of algorithms; but sliding-log calls only with
// calls of the same key and up to core.MaxLogCost members together, and a
// call of several limits with a sliding-log one not at all, so that one
// script call stays within the Redis time the sliding log's bounds allow.
func TestMergeBounds(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialed
	defer client.Close()
	s := mustNew(client)
	defer s.Close()
	gcra := core.PerMinute(1000)
	log := core.PerMinute(1000).WithAlgorithm(core.SlidingWindowLog)
	key := func(id int) string { return fmt.Sprintf("m:r:{ip:%d}", id) }
	one := func(l core.Limit, id, n int) *batchCall {
		c := s.batch.call()
		c.ctx = context.Background()
		c.oneKey(s.scripts(l).single, key(id), n)
		return c
	}
	multi := func(n int, id int, ls ...core.Limit) *batchCall {
		checks := make([]core.Check, len(ls))
		for i, l := range ls {
			checks[i] = core.Check{Key: fmt.Sprintf("m:r%d:{ip:%d}", i, id), Limit: l}
		}
		c := s.batch.call()
		c.ctx = context.Background()
		c.manyKeys(scriptFor(checks), s.manyArgs(checks, n, nil), checks, n)
		return c
	}
	// the calls that share each script call, by their index in batch
	groups := func(batch []*batchCall) [][]int {
		var out [][]int
		for _, m := range s.batch.merge(batch) {
			var g []int
			for _, c := range m.calls {
				for i, b := range batch {
					if b == c {
						g = append(g, i)
					}
				}
			}
			out = append(out, g)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		batch []*batchCall
		want  string
	}{
		{"gcra, any keys", []*batchCall{one(gcra, 1, 1), one(gcra, 2, 5), one(gcra, 1, 1)}, "[[0 1 2]]"},
		{"sliding log, by key", []*batchCall{one(log, 1, 1), one(log, 2, 1), one(log, 1, 3), one(log, 2, 1), one(log, 3, 1)}, "[[0 2] [1 3]]"},
		{"sliding log, up to MaxLogCost members", []*batchCall{
			one(log, 1, 300), one(log, 1, 100), one(log, 1, 1), one(log, 1, 399), one(log, 1, 1), one(log, 1, 400),
		}, "[[0 1] [2 3]]"}, // 300+100; 1+399; then 1 and 400 apart
		{"several limits", []*batchCall{multi(1, 1, gcra, gcra), multi(2, 2, gcra, gcra), multi(1, 3, gcra, log), multi(1, 3, gcra, log)}, "[[0 1]]"},
	} {
		if got := fmt.Sprint(groups(tc.batch)); got != tc.want {
			t.Errorf("%s: merged %s, want %s", tc.name, got, tc.want)
		}
		for _, c := range tc.batch {
			c.merged = nil
		}
	}
}
