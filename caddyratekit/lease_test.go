package caddyratekit_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ratekit/ratekit/internal/redistest"
)

// With lease, a hot key costs Redis one script call per lease, not one
// per request, and the limit holds within the lease's overshoot.
func TestLease(t *testing.T) {
	srv := redistest.StartServer(t)
	url := "redis://" + srv.Addr()
	const limit, size, requests = 10_000, 50, 1000
	for _, c := range []struct {
		name, more string
		maxCalls   int64
	}{
		{"exact", ``, requests},
		{"lease", `"lease":{"size":50,"hold":"1h"}`, requests / 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := fromJSON(t, handlerJSON(url, `{"name":"`+c.name+`","limit":10000,"period":3600000000000}`, c.more))
			provision(t, h)
			// one request first, so that the script is loaded: concurrent
			// first calls each load it (NOSCRIPT, then EVAL), a script call
			// more each, once in the server's life
			get(t, h, "/", "198.51.100.9")
			srv.ResetStats(t, context.Background())
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range requests / 8 {
						if a := get(t, h, "/", "198.51.100.1"); a.status == http.StatusOK {
							allowed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			stats := srv.CommandStats(t, context.Background())
			calls := stats["evalsha"] + stats["eval"]
			t.Logf("%s: %d requests, %d allowed, %d script calls", c.name, requests, allowed.Load(), calls)
			if allowed.Load() != requests {
				t.Errorf("%d of %d allowed under a limit of %d", allowed.Load(), requests, limit)
			}
			if calls > c.maxCalls {
				t.Errorf("%d script calls for %d requests, want at most %d", calls, requests, c.maxCalls)
			}
		})
	}
	// the overshoot is bounded by the lease: a limit of 200 leases 50 at
	// most (size), so one instance admits at most 200 + 49
	h := fromJSON(t, handlerJSON(url, `{"name":"small","limit":200,"period":3600000000000}`, `"lease":{"size":`+itoa(size)+`}`))
	provision(t, h)
	allowed := 0
	for range 400 {
		if a := get(t, h, "/", "198.51.100.2"); a.status == http.StatusOK {
			allowed++
		}
	}
	if allowed < 200-size || allowed > 200+size-1 {
		t.Errorf("%d allowed of a limit of 200 leased %d at a time, want within the lease's bound", allowed, size)
	}
}
