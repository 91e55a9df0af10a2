package storetest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/storetest"
	"github.com/ratekit/ratekit/memorystore"
)

// clock is a fake clock that stands still until stepped.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// memoryStores returns a constructor of MemoryStores with opts.
func memoryStores(opts ...memorystore.Option) func(t *testing.T) core.Store {
	return func(t *testing.T) core.Store {
		s, err := memorystore.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

func TestMemoryStore(t *testing.T) {
	t.Run("synctest", func(t *testing.T) {
		storetest.Run(t, newMemoryStore, storetest.WithSynctest()) // as in Example
	})
	t.Run("fake clock", func(t *testing.T) {
		// a few seconds before an hour's edge: fixed windows end soon
		c := &clock{now: time.Date(2026, 3, 14, 15, 59, 57, 123_456_000, time.UTC)}
		storetest.Run(t, memoryStores(memorystore.WithClock(c.Now)), storetest.WithAdvance(c.Advance))
	})
	t.Run("real clock", func(t *testing.T) {
		storetest.Run(t, memoryStores())
	})
}
