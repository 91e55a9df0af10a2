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

func ExampleLimiter_StorageKey() {
	store, err := memorystore.New()
	if err != nil {
		panic(err)
	}
	limiter, err := core.NewLimiter(store, core.WithPrefix("rl:"))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	k, _ := limiter.StorageKey("api", "ip:203.0.113.7")
	fmt.Println(k)
	// an identity that tries to steer the Cluster slot is hashed
	k, _ = limiter.StorageKey("api", "user:{victim}")
	fmt.Println(k[:20] + "…")
	// Output:
	// rl:api:{ip:203.0.113.7}
	// rl:api:{#ac45644e77e…
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
