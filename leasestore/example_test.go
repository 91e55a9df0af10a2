package leasestore_test

import (
	"fmt"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/memorystore"
)

// A Store over a shared store: a hot key takes its units in leases
// of 1/64 of the limit by default, so per window replicas together admit
// at most limit + (lease size − 1) × replicas.
func ExampleStore_Size() {
	shared, err := memorystore.New() // in production, a redisstore.Store
	if err != nil {
		panic(err)
	}
	defer shared.Close()
	store, err := leasestore.New(shared)
	if err != nil {
		panic(err)
	}
	defer store.Close()

	const replicas = 4
	for _, limit := range []core.Limit{core.PerSecond(100), core.PerMinute(6400), core.PerSecond(1_000_000)} {
		size := store.Size(limit)
		fmt.Printf("%v: leases of %d, at most %d per window\n", limit, size, limit.Capacity()+(size-1)*replicas)
	}
	// Output:
	// 100 per 1s (gcra, burst 100): leases of 1, at most 100 per window
	// 6400 per 1m0s (gcra, burst 6400): leases of 100, at most 6796 per window
	// 1000000 per 1s (gcra, burst 1000000): leases of 15625, at most 1062496 per window
}
