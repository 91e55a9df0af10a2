package core_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
)

// Fixtures that several of core's external test files share.

// fakeClock is a settable clock shared by a MemoryStore and a miniredis.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// start is an arbitrary instant inside a minute, well clear of any window
// edge for the periods the tests use.
var start = time.Date(2026, 3, 14, 15, 9, 26, 535_897_000, time.UTC)

// batched returns a store over c that coalesces calls into pipelines.
func batched(t testing.TB, c redis.Scripter) core.Store {
	s := core.MustRedisStore(c, core.WithBatching(core.Batching{}))
	t.Cleanup(func() { s.Close() })
	return s
}

var algorithms = []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter}

// uniqueKey returns a fresh key for one identity under rule.
func uniqueKey(t *testing.T, rule string) string {
	k, err := core.KeyOf("rk:", rule, fmt.Sprintf("ip:%s-%d", t.Name(), rand.Uint64()))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
