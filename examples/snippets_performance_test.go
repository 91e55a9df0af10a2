package examples_test

// Snippets of docs/performance.md, checked like those of snippets_test.go.

import (
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/redisstore"
)

// Batching turned on over a Cluster client.
func Example_batching() {
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.1:7000"}})
	// snippet:batching
	store, err := redisstore.New(cluster, redisstore.WithBatching(redisstore.Batching{})) // the default sizes
	if err != nil {
		log.Fatal(err)
	}
	// snippet:end
	defer store.Close()
}

// Leasing over the Redis store.
func Example_leasing() {
	store := redisStore()
	// snippet:leasing
	leasing, err := leasestore.New(store) // over the Redis store
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := core.NewLimiter(leasing) // every middleware over this Limiter leases
	if err != nil {
		log.Fatal(err)
	}
	// snippet:end
	defer limiter.Close()
}
