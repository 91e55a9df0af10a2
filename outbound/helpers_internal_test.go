package outbound

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// newMini returns a miniredis and a client of it, both closed when the test
// ends.
func newMini(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return mr, c
}

// handClock is a clock stepped by hand, shared by a Limiter (its local
// clock) and a miniredis (Redis's clock), offset by skew: the Limiter's
// clock reads Redis's time plus skew.
type handClock struct {
	mr   *miniredis.Miniredis
	now  time.Time
	skew time.Duration
}

func newHandClock(mr *miniredis.Miniredis) *handClock {
	c := &handClock{mr: mr, now: time.Unix(1_700_000_000, 0)}
	mr.SetTime(c.now)
	return c
}

// set moves both clocks to t (Redis's).
func (c *handClock) set(t time.Time) {
	c.now = t
	c.mr.SetTime(t)
}

func (c *handClock) advance(d time.Duration) { c.set(c.now.Add(d)) }

// local returns the Limiter's clock: Redis's plus skew, without a monotonic
// reading.
func (c *handClock) local() time.Time { return c.now.Add(c.skew).Round(0) }
