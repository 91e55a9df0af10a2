package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

func TestTraitsKeepsDeadlines(t *testing.T) {
	honours := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	ignores := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	noDeadline := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: -2})
	clusterIgnores := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true})
	for _, c := range []interface{ Close() error }{honours, ignores, noDeadline, cluster, clusterIgnores, ring} {
		t.Cleanup(func() { c.Close() })
	}
	batched := testkit.MustRedis(honours, redisstore.WithBatching(redisstore.Batching{}))
	t.Cleanup(func() { batched.Close() })
	for _, tc := range []struct {
		name  string
		store core.Store
		want  bool
	}{
		{"client with ContextTimeoutEnabled", testkit.MustRedis(honours), true},
		// batching keeps deadlines whatever the client: calls wait for their
		// pipeline with a timer, and over a client that ignores deadlines
		// the pipelines go out from the store's own goroutines
		{"default client (batching)", testkit.MustRedis(ignores), true},
		// a *redis.Client without ContextTimeoutEnabled keeps them for the
		// store's calls, which go out through a view of it that does
		{"default client, unbatched", testkit.MustRedis(ignores, redisstore.WithoutBatching()), true},
		{"client with no socket deadlines, unbatched", testkit.MustRedis(noDeadline, redisstore.WithoutBatching()), false},
		{"client with no socket deadlines (batching)", testkit.MustRedis(noDeadline), true},
		{"cluster without ContextTimeoutEnabled, unbatched", testkit.MustRedis(clusterIgnores), false},
		{"cluster", testkit.MustRedis(cluster), true},
		{"ring", testkit.MustRedis(ring), true},
		{"batching", batched, true},
		{"leasing", testkit.MustLeasing(testkit.MustRedis(honours)), true},
		{"leasing over a default client", testkit.MustLeasing(testkit.MustRedis(ignores)), true},
		{"leasing over a default client, unbatched", testkit.MustLeasing(testkit.MustRedis(ignores, redisstore.WithoutBatching())), true},
		{"memory", testkit.MustMemory(), false},
	} {
		if got := testkit.Traits(tc.store).KeepsDeadlines; got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
