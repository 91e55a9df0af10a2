package core_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/memorystore"
)

// A cost above the limit's capacity can never pass: the store says so
// without spending anything.
func ExampleResult_Never() {
	store, err := memorystore.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	res, _ := store.AllowAllN(context.Background(), []core.Check{{Key: "k", Limit: core.PerMinute(10)}}, 11)
	fmt.Println(res[0].Allowed, res[0].Never(), res[0].Remaining)
	// Output:
	// false true 10
}

func ExampleLimit_String() {
	fmt.Println(core.PerMinute(100))
	fmt.Println(core.PerHour(1000).WithAlgorithm(core.SlidingWindowLog))
	fmt.Println(core.Limit{Rate: 0, Period: time.Second}.Validate())
	// Output:
	// 100 per 1m0s (gcra, burst 100)
	// 1000 per 1h0m0s (sliding-log)
	// ratekit: invalid limit: rate 0 out of range [1, 1073741824]
}

// Three per ten minutes, GCRA (the default): the three pass at once, and the
// next unit is due a third of the period later.
func ExamplePer() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memorystore.New(memorystore.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	defer store.Close()
	limit := core.Per(3, 10*time.Minute)
	fmt.Println(limit)
	for range 4 {
		res, err := store.AllowAllN(context.Background(), []core.Check{{Key: "login:alice", Limit: limit}}, 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(res[0].Allowed, res[0].Remaining, res[0].RetryAfter)
	}
	// Output:
	// 3 per 10m0s (gcra, burst 3)
	// true 2 0s
	// true 1 0s
	// true 0 0s
	// false 0 3m20s
}
