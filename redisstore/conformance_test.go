package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/storetest"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/redisstore"
)

// memoryStores returns a constructor of MemoryStores on clock.
func memoryStores(clock *testkit.Clock) func(t *testing.T) core.Store {
	return func(t *testing.T) core.Store {
		s, err := memorystore.New(memorystore.WithClock(clock.Now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// redisStores returns a constructor of RedisStores over c that send each
// call by itself (batchedStores covers the default).
func redisStores(c redis.Scripter) func(t *testing.T) core.Store {
	return func(t *testing.T) core.Store {
		s, err := redisstore.New(c, redisstore.WithoutBatching())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// batchedStores returns a constructor of RedisStores over c that batch
// their calls.
func batchedStores(c redis.Scripter) func(t *testing.T) core.Store {
	return func(t *testing.T) core.Store { return testkit.Batched(t, c) }
}

// leasingStores returns a constructor of LeasingStores, each over a store
// from inner, leasing up to 4 units at a time (the default would lease
// nothing under the suite's limits, all below 128 units).
func leasingStores(inner func(t *testing.T) core.Store, opts ...leasestore.Option) func(t *testing.T) core.Store {
	return func(t *testing.T) core.Store {
		s, err := leasestore.New(inner(t), append([]leasestore.Option{leasestore.WithSize(4)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// expiring checks that every key a call left in Redis has an expiry: no
// script may leave a key behind for ever.
func expiring(c redis.Cmdable) storetest.Option {
	return storetest.WithAfterCall(func(t *testing.T, keys []string) {
		t.Helper()
		for _, k := range keys {
			ttl, err := c.PTTL(t.Context(), k).Result()
			if err != nil {
				t.Fatalf("PTTL %s: %v", k, err)
			}
			if ttl == -1 {
				t.Fatalf("key %s has no expiry", k)
			}
		}
	})
}

func TestConformanceMemoryStore(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	storetest.Run(t, memoryStores(clock), storetest.WithAdvance(clock.Add))
}

func TestConformanceMiniredis(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		clock := testkit.NewClock(testkit.Start)
		c, advance := testkit.FakeRedis(t, clock)
		storetest.Run(t, redisStores(c), storetest.WithAdvance(advance), expiring(c))
	})
	t.Run("batching", func(t *testing.T) {
		clock := testkit.NewClock(testkit.Start)
		c, advance := testkit.FakeRedis(t, clock)
		storetest.Run(t, batchedStores(c), storetest.WithAdvance(advance), expiring(c))
	})
}

// TestConformanceRedisServer runs the suite on a real redis-server, whose
// clock cannot be stepped: the cases that step time are skipped (miniredis
// runs them on the same scripts).
func TestConformanceRedisServer(t *testing.T) {
	c := redistest.StartServer(t).Client(t)
	t.Run("plain", func(t *testing.T) {
		storetest.Run(t, redisStores(c), expiring(c))
	})
	t.Run("batching", func(t *testing.T) {
		storetest.Run(t, batchedStores(c), expiring(c))
	})
}

// TestConformanceCluster runs the suite on a real Redis Cluster of three
// masters: every call's keys share one identity's hash slot.
func TestConformanceCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3).Client(t)
	t.Run("plain", func(t *testing.T) {
		storetest.Run(t, redisStores(c), expiring(c))
	})
	t.Run("batching", func(t *testing.T) {
		storetest.Run(t, batchedStores(c), expiring(c))
	})
}

// TestConformanceLeasingStore runs the suite on LeasingStores over
// RedisStores: over miniredis on one fake clock with the leasing store,
// and over a real redis-server on the real clock. Each leases up to 4
// units at a time, so that the suite's limits are leased.
func TestConformanceLeasingStore(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		clock := testkit.NewClock(testkit.Start)
		c, advance := testkit.FakeRedis(t, clock)
		stores := leasingStores(redisStores(c), leasestore.WithClock(clock.Now))
		storetest.Run(t, stores, storetest.WithLeasing(), storetest.WithAdvance(advance), expiring(c))
	})
	t.Run("redis-server", func(t *testing.T) {
		// a hold longer than any case: on the real clock no lease then
		// expires unspent while a case runs, however slow the machine
		c := redistest.StartServer(t).Client(t)
		stores := leasingStores(redisStores(c), leasestore.WithHold(time.Hour))
		storetest.Run(t, stores, storetest.WithLeasing(), expiring(c))
	})
}
