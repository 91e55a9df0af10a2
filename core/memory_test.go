package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
)

// TestMemoryStoreBounded sends a million distinct identities through a
// MemoryStore while its clock moves on: state of expired keys is reclaimed,
// so the store holds about the identities of the last period, not all.
func TestMemoryStoreBounded(t *testing.T) {
	total, perSecond := 1_000_000, 10_000
	if raceEnabled || testing.Short() {
		total = 200_000
	}
	clock := &fakeClock{now: start}
	s := core.NewMemoryStore(core.WithClock(clock.Now))
	defer s.Close()
	ctx := context.Background()
	limit := core.PerSecond(5)
	peak := 0
	for i := range total {
		if i%perSecond == 0 && i > 0 {
			clock.Add(time.Second)
			peak = max(peak, s.Len())
		}
		if _, err := s.Allow(ctx, fmt.Sprintf("rk:r:{ip:%d}", i), limit); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(time.Second)
	// keys live at most one period (plus a millisecond): about two seconds'
	// worth of identities at any time, whatever the total
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
	clock := &fakeClock{now: start}
	s := core.NewMemoryStore(core.WithClock(clock.Now), core.WithMaxKeys(1000))
	defer s.Close()
	for i := range 20_000 {
		if _, err := s.Allow(context.Background(), fmt.Sprintf("k%d", i), core.PerHour(5)); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Len(); n > 1000 {
		t.Fatalf("Len = %d, want at most 1000", n)
	}
}
