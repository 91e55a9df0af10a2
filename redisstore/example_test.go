package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/redisstore"
)

// A Store over any go-redis client: here a miniredis, so the example
// runs anywhere.
func ExampleStore() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	store, err := redisstore.New(client)
	if err != nil {
		panic(err)
	}
	check := []core.Check{{Key: "rl:login:{ip:203.0.113.7}", Limit: core.PerMinute(3)}}
	for range 4 {
		res, err := store.AllowAllN(context.Background(), check, 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(res[0].Allowed, res[0].Remaining, res[0].RetryAfter.Round(time.Second))
	}
	// Output:
	// true 2 0s
	// true 1 0s
	// true 0 0s
	// false 0 20s
}

// Several limits of one identity are decided all or nothing: the hourly
// limit loses nothing to requests that the per-second limit denies.
func ExampleStore_AllowAllN() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	store, err := redisstore.New(client)
	if err != nil {
		panic(err)
	}

	// one identity's keys share a hash tag, so they share a Cluster slot
	checks := []core.Check{
		{Key: "rl:burst:{user:42}", Limit: core.PerSecond(2)},
		{Key: "rl:hourly:{user:42}", Limit: core.PerHour(100).WithAlgorithm(core.FixedWindow)},
	}
	for range 3 {
		res, err := store.AllowAllN(context.Background(), checks, 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v second=%d hour=%d\n", res[0].Allowed, res[0].Remaining, res[1].Remaining)
	}
	// Output:
	// allowed=true second=1 hour=99
	// allowed=true second=0 hour=98
	// allowed=false second=0 hour=98
}
