package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
)

// TestLeasingBound runs four replicas, each with its own LeasingStore over
// one shared store and one clock, at a steady crowd of decisions on one key.
// Per fixed window the total admitted stays within
// limit + (lease size − 1) × replicas, and not far below the limit.
func TestLeasingBound(t *testing.T) {
	const (
		replicas = 4
		size     = 8
		limit    = 100
	)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	shared := core.NewMemoryStore(core.WithClock(clock.Now))
	defer shared.Close()
	var stores []*core.LeasingStore
	for range replicas {
		s := core.NewLeasingStore(shared, core.WithLeaseSize(size), core.WithLeaseHold(100*time.Millisecond), core.WithLeaseClock(clock.Now))
		defer s.Close()
		stores = append(stores, s)
	}
	l := core.PerSecond(limit).WithAlgorithm(core.FixedWindow)
	ctx := context.Background()
	for _, crowd := range []struct {
		name  string
		every int // each replica decides once every this many ms...
		burst int // ...this many times
	}{{"dense", 1, 3}, {"near the limit", 36, 1}} {
		t.Run(crowd.name, func(t *testing.T) {
			admitted := map[int64]int{} // window (second) → units admitted
			calls := 0
			for step := range 5000 { // 5 s in 1 ms steps
				for i, s := range stores {
					if (step+i*2)%crowd.every != 0 {
						continue
					}
					for range crowd.burst {
						r, err := s.Allow(ctx, "rk:hot:{ip:192.0.2.1}", l)
						if err != nil {
							t.Fatal(err)
						}
						calls++
						if r.Allowed {
							admitted[clock.Now().Unix()]++
						}
					}
				}
				clock.Add(time.Millisecond)
			}
			bound := limit + (size-1)*replicas
			for w, n := range admitted {
				if n > bound {
					t.Errorf("window %d: admitted %d, bound %d", w, n, bound)
				}
				if n < limit-size*replicas {
					t.Errorf("window %d: admitted only %d of %d", w, n, limit)
				}
			}
			t.Logf("%d calls, admitted per window: %v (bound %d)", calls, admitted, bound)
		})
	}
}

// TestLeasingColdKey checks that a key seen rarely takes no lease: the
// shared store is asked for exactly one unit per decision.
func TestLeasingColdKey(t *testing.T) {
	clock := &fakeClock{now: start}
	shared := core.NewMemoryStore(core.WithClock(clock.Now))
	defer shared.Close()
	s := core.NewLeasingStore(shared, core.WithLeaseClock(clock.Now))
	defer s.Close()
	l := core.PerHour(10)
	ctx := context.Background()
	for i := range 5 {
		r, err := s.Allow(ctx, "k", l)
		if err != nil || !r.Allowed || r.Remaining != 9-i {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
		clock.Add(time.Second) // one call a second: cold
	}
	// the shared store saw exactly five units
	if r, _ := shared.AllowN(ctx, "k", l, 5); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("shared store after five cold calls: %+v", r)
	}
}
