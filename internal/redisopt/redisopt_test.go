package redisopt_test

import (
	"testing"
	"time"

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
		{"client, ContextTimeoutEnabled, no socket deadlines", redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -2}), false},
		{"client, ContextTimeoutEnabled, no read deadline", redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: time.Second}), false},
		{"client, ContextTimeoutEnabled, no write deadline", redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, WriteTimeout: -2}), false},
		{"client, ContextTimeoutEnabled, no timeouts", redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -1, WriteTimeout: -1}), true},
		{"cluster, defaults", redis.NewClusterClient(&redis.ClusterOptions{}), false},
		{"cluster, ContextTimeoutEnabled", redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true}), true},
		{"cluster, ContextTimeoutEnabled, no socket deadlines", redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true, ReadTimeout: -2}), false},
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
