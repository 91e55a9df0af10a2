package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
)

// TestScriptsCacheBound decides under more distinct limits than the store
// compiles scripts for: the first maxCompiledLimits get scripts of their
// own, cached once, and every further limit is still decided exactly,
// through the generic scripts, without entering the cache. Concurrent
// first calls of one limit share one compiled script.
func TestScriptsCacheBound(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()

	first := core.PerHour(1).WithBurst(2)
	var (
		wg  sync.WaitGroup
		got [8]*limitScripts
	)
	for i := range got {
		wg.Go(func() { got[i] = s.scripts(first) })
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] || got[i].single == nil {
			t.Fatalf("concurrent first lookups: %p and %p (compiled %v): want one compiled entry", got[i], got[0], got[i].single != nil)
		}
	}

	const extra = 20
	for i := range maxCompiledLimits + extra {
		// burst 2: two calls allowed, the third denied, on every path
		limit := core.PerHour(1000 + i).WithBurst(2)
		key := fmt.Sprintf("cache:{%d}", i)
		for call, want := range []bool{true, true, false} {
			r, err := s.AllowAllN(ctx, []core.Check{{Key: key, Limit: limit}}, 1)
			if err != nil {
				t.Fatalf("limit %d, call %d: %v", i, call, err)
			}
			if r[0].Allowed != want || r[0].Limit != limit {
				t.Fatalf("limit %d, call %d: %+v, want allowed %v", i, call, r[0], want)
			}
		}
		ls := s.scripts(limit)
		cached := i+1 < maxCompiledLimits // first took one place
		if compiled := ls.single != nil; compiled != cached {
			t.Fatalf("limit %d: compiled %v, want %v", i, compiled, cached)
		}
		if cached && s.scripts(limit) != ls {
			t.Fatalf("limit %d: compiled twice", i)
		}
	}
	if n := len(*s.limits.Load()); n != maxCompiledLimits {
		t.Fatalf("cache holds %d limits, want %d", n, maxCompiledLimits)
	}
}
