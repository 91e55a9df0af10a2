package redisstore

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestBatchingByDefault: a redisstore.Store batches over a *redis.Client unless
// told not to, and over a Cluster or Ring client, or one without
// Pipeline, only when told to.
func TestBatchingByDefault(t *testing.T) {
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	for _, c := range []interface{ Close() error }{plain, cluster, ring} {
		t.Cleanup(func() { c.Close() })
	}
	for _, tc := range []struct {
		name   string
		client redis.Scripter
		opts   []Option
		want   bool
	}{
		{"client", plain, nil, true},
		{"client, WithoutBatching", plain, []Option{WithoutBatching()}, false},
		{"client, WithBatching", plain, []Option{WithBatching(Batching{MaxBatch: 8})}, true},
		{"cluster", cluster, nil, false},
		{"cluster, WithBatching", cluster, []Option{WithBatching(Batching{})}, true},
		{"ring", ring, nil, false},
		{"ring, WithBatching", ring, []Option{WithBatching(Batching{})}, true},
		{"scripter without Pipeline", scriptsOnly{plain}, nil, false},
	} {
		s := mustNew(tc.client, tc.opts...)
		if got := s.batch != nil; got != tc.want {
			t.Errorf("%s: batching %v, want %v", tc.name, got, tc.want)
		}
		if s.batch != nil && (s.batch.maxBatch < 1 || s.batch.parallel < 1) {
			t.Errorf("%s: batching with MaxBatch %d, Parallel %d", tc.name, s.batch.maxBatch, s.batch.parallel)
		}
		s.Close()
	}
}

// scriptsOnly hides every method of a client but those of redis.Scripter.
type scriptsOnly struct{ redis.Scripter }

// mustNew is New for a client and options a test knows to be valid.
func mustNew(client redis.Scripter, opts ...Option) *Store {
	s, err := New(client, opts...)
	if err != nil {
		panic(err)
	}
	return s
}
