package memorystore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/memorystore"
)

// TestMemoryStoreBounded sends a million distinct identities through a
// memorystore.Store while its clock moves on: state of expired keys is reclaimed,
// so the store holds about the identities of the last period, not all.
func TestMemoryStoreBounded(t *testing.T) {
	total, perSecond := 1_000_000, 10_000
	if raceEnabled || testing.Short() {
		total = 200_000
	}
	clock := testkit.NewClock(testkit.Start)
	s := testkit.MustMemory(memorystore.WithClock(clock.Now))
	defer s.Close()
	ctx := context.Background()
	limit := core.PerSecond(5)
	peak := 0
	for i := range total {
		if i%perSecond == 0 && i > 0 {
			clock.Add(time.Second)
			peak = max(peak, s.Len())
		}
		if _, err := testkit.AllowOne(s, ctx, fmt.Sprintf("rk:r:{ip:%d}", i), limit, 1); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(time.Second)
	// keys live at most one period, and their entries a second more:
	// about two seconds' worth of identities at any time, whatever the
	// total
	if bound := 3 * perSecond; peak > bound {
		t.Fatalf("store held %d keys at its peak, want at most %d for %d identities", peak, bound, total)
	}
	if n := s.Len(); n > perSecond {
		t.Fatalf("after the last period: %d keys left", n)
	}
	t.Logf("%d identities: peak %d keys", total, peak)
}

// TestMemoryStoreMaxKeys checks the hard bound when keys do not expire.
func TestMemoryStoreMaxKeys(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	s := testkit.MustMemory(memorystore.WithClock(clock.Now), memorystore.WithMaxKeys(1000))
	defer s.Close()
	for i := range 20_000 {
		if _, err := testkit.AllowOne(s, context.Background(), fmt.Sprintf("k%d", i), core.PerHour(5), 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Len(); n > 1000 {
		t.Fatalf("Len = %d, want at most 1000", n)
	}
}

// TestMemoryStoreKeepsUpdatedState spends a key often, far past the time its
// first state would have expired: updates in place must keep the entry.
func TestMemoryStoreKeepsUpdatedState(t *testing.T) {
	for _, alg := range []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			clock := testkit.NewClock(testkit.Start)
			s := testkit.MustMemory(memorystore.WithClock(clock.Now))
			defer s.Close()
			limit := core.PerSecond(4).WithAlgorithm(alg)
			allowed := 0
			// 40 requests a second for 30 seconds: the limit admits 4 a
			// second, about 120 in all (the sliding counter's weighting
			// admits fewer), and more only if state were lost
			for range 30 * 40 {
				res, err := testkit.AllowOne(s, context.Background(), "k", limit, 1)
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed {
					allowed++
				}
				clock.Add(25 * time.Millisecond)
			}
			if allowed < 85 || allowed > 130 {
				t.Fatalf("%d allowed in 30s at 4/s", allowed)
			}
		})
	}
}
