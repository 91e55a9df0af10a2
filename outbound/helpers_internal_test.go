package outbound

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
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
	mu   sync.Mutex // the heartbeat reads the clock too
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
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	c.mr.SetTime(t)
}

func (c *handClock) advance(d time.Duration) { c.set(c.redis().Add(d)) }

// redis returns Redis's time.
func (c *handClock) redis() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// local returns the Limiter's clock: Redis's plus skew, without a monotonic
// reading.
func (c *handClock) local() time.Time { return c.redis().Add(c.skew).Round(0) }

// bubbleRedis is a redis.Scripter over a miniredis that runs outside a
// testing/synctest bubble, whose clock it sets to the bubble's before every
// call (plus skew): a script's TIME is then the bubble's fake time.
type bubbleRedis struct {
	redis.Scripter
	mr   *miniredis.Miniredis
	skew time.Duration // Redis's clock less the bubble's
}

func (b *bubbleRedis) sync() { b.mr.SetTime(time.Now().Add(b.skew)) }

func (b *bubbleRedis) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	b.sync()
	return b.Scripter.Eval(ctx, script, keys, args...)
}

func (b *bubbleRedis) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	b.sync()
	return b.Scripter.EvalSha(ctx, sha, keys, args...)
}

// inBubble runs f in a synctest bubble with a Redis client of mr made in
// it, closed at the end.
func inBubble(t *testing.T, mr *miniredis.Miniredis, f func(t *testing.T, rdb *bubbleRedis)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
		defer c.Close()
		f(t, &bubbleRedis{Scripter: c, mr: mr})
	})
}

// mustNew returns a Limiter closed when the test ends.
func mustNew(t testing.TB, c redis.Scripter, limit Limit, opts ...Option) *Limiter {
	t.Helper()
	opts = append([]Option{WithTimeout(10 * time.Second)}, opts...)
	l, err := New(c, "api", limit, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
