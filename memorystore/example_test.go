package memorystore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/memorystore"
)

// A Store with a clock stepped by hand shows how GCRA refills: one
// unit every period/rate.
func ExampleStore() {
	// the clock in ns: the store's cache reads it on a goroutine of its own too
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	store, err := memorystore.New(memorystore.WithClock(func() time.Time { return time.Unix(0, now.Load()) }))
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
	now.Add(int64(100 * time.Millisecond))
	res, _ := store.AllowAllN(ctx, check, 1)
	fmt.Println(res[0].Allowed, res[0].Remaining, res[0].RetryAfter)
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 100ms
	// true 0 0s
}
