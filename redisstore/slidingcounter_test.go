package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// TestSlidingCounterExpiry follows the expiry of sliding window counters'
// keys, on one clock, through allowed calls of one window and of the
// windows after: whichever call wrote last, a key expires one period after
// the end of its window, to the ms, as every call of the window would set
// it. The one-key script (slidingcounter_single.lua) and the script of
// several limits (decide.lua over slidingcounter.lua) leave the expiry of
// their window's first write in place on later writes of that window, so
// a call that moved a key into a new window without setting its expiry
// anew would show here.
func TestSlidingCounterExpiry(t *testing.T) {
	clock := testkit.NewClock(testkit.Start.Truncate(time.Second))
	c, advance := testkit.FakeRedis(t, clock)
	s, err := redisstore.New(c, redisstore.WithoutBatching())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	l := core.PerSecond(100).WithAlgorithm(core.SlidingWindowCounter)
	one, a, b := "sce:one:{x}", "sce:a:{y}", "sce:b:{y}"
	start := clock.Now()
	// offsets from the first window's start: three calls in it, two in the
	// next, one two windows later
	for _, at := range []int{100, 400, 999, 1200, 1900, 3500} {
		advance(start.Add(time.Duration(at) * time.Millisecond).Sub(clock.Now()))
		now := clock.Now()
		if r, err := testkit.AllowOne(s, ctx, one, l, 1); err != nil || !r.Allowed {
			t.Fatalf("at %d ms: one key: %+v, %v; want allowed", at, r, err)
		}
		res, err := s.AllowAllN(ctx, []core.Check{{Key: a, Limit: l}, {Key: b, Limit: l}}, 2)
		if err != nil || !res[0].Allowed || !res[1].Allowed {
			t.Fatalf("at %d ms: two limits: %+v, %v; want allowed", at, res, err)
		}
		// the end of the window after now's, and the script's 1 ms more
		want := now.Truncate(time.Second).Add(2*time.Second + time.Millisecond).Sub(now)
		for _, k := range []string{one, a, b} {
			if ttl, err := c.PTTL(ctx, k).Result(); err != nil || ttl != want {
				t.Errorf("at %d ms: PTTL %s = %v, %v; want %v", at, k, ttl, err, want)
			}
		}
	}
}
