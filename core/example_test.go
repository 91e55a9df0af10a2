package core_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
)

// A RedisStore over any go-redis client: here a miniredis, so the example
// runs anywhere.
func ExampleRedisStore() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	store, err := core.NewRedisStore(client)
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
func ExampleRedisStore_AllowAllN() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	store, err := core.NewRedisStore(client)
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

// A MemoryStore with a clock stepped by hand shows how GCRA refills: one
// unit every period/rate.
func ExampleMemoryStore() {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	store, err := core.NewMemoryStore(core.WithClock(clock.Now))
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
	clock.Add(100 * time.Millisecond)
	res, _ := store.AllowAllN(ctx, check, 1)
	fmt.Println(res[0].Allowed, res[0].Remaining, res[0].RetryAfter)
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 100ms
	// true 0 0s
}

// A cost above the limit's capacity can never pass: the store says so
// without spending anything.
func ExampleResult_Never() {
	store, err := core.NewMemoryStore()
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
	store, err := core.NewMemoryStore()
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

// A LeasingStore over a shared store: a hot key takes its units in leases
// of 1/64 of the limit by default, so per window replicas together admit
// at most limit + (lease size − 1) × replicas.
func ExampleLeasingStore_LeaseSize() {
	shared, err := core.NewMemoryStore() // in production, a RedisStore
	if err != nil {
		panic(err)
	}
	defer shared.Close()
	store, err := core.NewLeasingStore(shared)
	if err != nil {
		panic(err)
	}
	defer store.Close()

	const replicas = 4
	for _, limit := range []core.Limit{core.PerSecond(100), core.PerMinute(6400), core.PerSecond(1_000_000)} {
		size := store.LeaseSize(limit)
		fmt.Printf("%v: leases of %d, at most %d per window\n", limit, size, limit.Capacity()+(size-1)*replicas)
	}
	// Output:
	// 100 per 1s (gcra, burst 100): leases of 1, at most 100 per window
	// 6400 per 1m0s (gcra, burst 6400): leases of 100, at most 6796 per window
	// 1000000 per 1s (gcra, burst 1000000): leases of 15625, at most 1062496 per window
}
