// Package redisopt reads what ratekit's Redis-backed packages need to know
// of a go-redis client's options.
package redisopt

import "github.com/redis/go-redis/v9"

// KeepsDeadlines reports whether client returns from each call by its
// context's deadline on its own: a go-redis Client, ClusterClient or Ring
// with ContextTimeoutEnabled. Any other client (a wrapper, a mock) is taken
// not to, so its callers keep the deadline themselves.
func KeepsDeadlines(client redis.Scripter) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}
