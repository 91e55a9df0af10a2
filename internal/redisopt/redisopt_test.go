package redisopt_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/redisopt"
)

// scripter is a client of another kind: one whose options cannot be read.
type scripter struct{ redis.Scripter }

func TestKeepsDeadlines(t *testing.T) {
	cases := []struct {
		name   string
		client redis.Scripter
		want   bool
	}{
		{"client, defaults", redis.NewClient(&redis.Options{}), false},
		{"client, ContextTimeoutEnabled", redis.NewClient(&redis.Options{ContextTimeoutEnabled: true}), true},
		{"cluster, defaults", redis.NewClusterClient(&redis.ClusterOptions{}), false},
		{"cluster, ContextTimeoutEnabled", redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true}), true},
		{"ring, defaults", redis.NewRing(&redis.RingOptions{}), false},
		{"ring, ContextTimeoutEnabled", redis.NewRing(&redis.RingOptions{ContextTimeoutEnabled: true}), true},
		{"a client of another kind", scripter{}, false},
	}
	for _, c := range cases {
		if got := redisopt.KeepsDeadlines(c.client); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		if closer, ok := c.client.(interface{ Close() error }); ok {
			closer.Close()
		}
	}
}
