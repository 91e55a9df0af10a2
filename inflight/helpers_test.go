package inflight_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/inflight"
)

// t0 is the still clock of miniredis in these tests.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newLimiter returns a Limiter over a fresh miniredis whose clock stands at
// t0, closed when the test ends.
func newLimiter(t *testing.T, opts ...inflight.Option) (*inflight.Limiter, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.SetTime(t0)
	// one dial, no retries: a test that stops miniredis ends fast
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	// miniredis shares this process's CPU: a deadline of a second keeps a
	// busy machine from sending the tests to the failure policy
	l, err := inflight.New(rdb, append([]inflight.Option{inflight.WithTimeout(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, mr
}

// acquire calls Acquire and fails the test on an error.
func acquire(t *testing.T, l *inflight.Limiter, key string, limit int) (*inflight.Lease, inflight.Result) {
	t.Helper()
	le, res, err := l.Acquire(context.Background(), key, limit)
	if err != nil {
		t.Fatalf("Acquire(%q, %d): %v", key, limit, err)
	}
	if (le != nil) != res.Allowed {
		t.Fatalf("Acquire(%q, %d): lease %v with Allowed %v", key, limit, le, res.Allowed)
	}
	return le, res
}

// startMiniredis starts a miniredis on the real clock and returns its
// address; it stops with the test.
func startMiniredis(t *testing.T) string {
	t.Helper()
	return miniredis.RunT(t).Addr()
}

// noLeaks checks, once the test and its cleanups are done, that no
// goroutine it started outlives it.
func noLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}
