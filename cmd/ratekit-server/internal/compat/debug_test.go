package compat

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestDebugConcurrent(t *testing.T) {
	rs := redistest.StartServer(t)
	for _, batch := range []int{0, 4} {
		c := rs.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
		s, _ := New(c, Options{Batch: batch})
		var ok atomic.Int64
		var wg sync.WaitGroup
		key := "k" + time.Now().String()
		for range 400 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := s.AllowAllN(context.Background(), []core.Check{{Key: key, Limit: core.Limit{Rate: 100, Period: time.Minute, Algorithm: core.FixedWindow}}}, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if r[0].Allowed {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		v, _ := c.Get(context.Background(), key).Result()
		t.Logf("batch %d: allowed %d, value %s", batch, ok.Load(), v)
	}
}
