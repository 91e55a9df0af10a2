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
