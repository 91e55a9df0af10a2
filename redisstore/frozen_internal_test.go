package redisstore

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// frozenRedis starts a miniredis whose clock stands still, as Redis's does
// during a script, until advance moves it, and returns a client of it and
// the clock's reading (a whole second and 535,897 µs into a minute).
func frozenRedis(t *testing.T) (c *redis.Client, now func() time.Time, advance func(time.Duration)) {
	t.Helper()
	m := miniredis.RunT(t)
	at := time.Date(2026, 3, 14, 15, 9, 26, 535_897_000, time.UTC)
	m.SetTime(at)
	c = redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return c, func() time.Time { return at }, func(d time.Duration) {
		at = at.Add(d)
		m.SetTime(at)
		m.FastForward(d)
	}
}
