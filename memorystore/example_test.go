package memorystore_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/memorystore"
)

// A Store with a clock stepped by hand shows how GCRA refills: one
// unit every period/rate.
func ExampleStore() {
	// the store's cache reads the clock from a goroutine of its own too
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memorystore.New(memorystore.WithClock(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	// one unit every 100ms, two at once
	check := []core.Check{{Key: "k", Limit: core.PerSecond(10).WithBurst(2)}}

	for range 3 {
		res, _ := store.AllowAllN(ctx, check, 1)
		fmt.Println(res[0].Allowed, res[0].Remaining, res[0].RetryAfter)
	}
	mu.Lock()
	now = now.Add(100 * time.Millisecond)
	mu.Unlock()
	res, _ := store.AllowAllN(ctx, check, 1)
	fmt.Println(res[0].Allowed, res[0].Remaining, res[0].RetryAfter)
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 100ms
	// true 0 0s
}
