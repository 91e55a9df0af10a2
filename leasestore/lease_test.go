package leasestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/memorystore"
)

// TestLeasingBound runs four replicas, each with its own leasestore.Store over
// one shared store and one clock, at a steady crowd of decisions on one key.
// Per fixed window the total admitted stays within
// limit + (lease size − 1) × replicas, and not far below the limit: with a
// lease size set, and with the default of 1/64 of the limit.
func TestLeasingBound(t *testing.T) {
	const replicas = 4
	type crowd struct {
		name  string
		every int // each replica decides once every this many ms...
		burst int // ...this many times
	}
	for _, tc := range []struct {
		name   string
		opts   []leasestore.Option
		limit  int
		size   int // the lease size the store must report
		crowds []crowd
	}{
		{"size 8", []leasestore.Option{leasestore.WithSize(8)}, 100, 8,
			[]crowd{{"dense", 1, 3}, {"near the limit", 36, 1}}},
		{"default size", nil, 6400, 100,
			[]crowd{{"dense", 1, 8}, {"near the limit", 1, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testkit.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			shared := testkit.MustMemory(memorystore.WithClock(clock.Now))
			defer shared.Close()
			var stores []*leasestore.Store
			for range replicas {
				opts := append([]leasestore.Option{leasestore.WithHold(100 * time.Millisecond), leasestore.WithClock(clock.Now)}, tc.opts...)
				s := testkit.MustLeasing(shared, opts...)
				defer s.Close()
				stores = append(stores, s)
			}
			l := core.PerSecond(tc.limit).WithAlgorithm(core.FixedWindow)
			if got := stores[0].Size(l); got != tc.size {
				t.Fatalf("LeaseSize(%v) = %d, want %d", l, got, tc.size)
			}
			ctx := context.Background()
			for _, crowd := range tc.crowds {
				t.Run(crowd.name, func(t *testing.T) {
					admitted := map[int64]int{} // window (second) → units admitted
					calls := 0
					for step := range 5000 { // 5 s in 1 ms steps
						for i, s := range stores {
							if (step+i*2)%crowd.every != 0 {
								continue
							}
							for range crowd.burst {
								r, err := testkit.AllowOne(s, ctx, "rk:hot:{ip:192.0.2.1}", l, 1)
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
					bound := tc.limit + (tc.size-1)*replicas
					for w, n := range admitted {
						if n > bound {
							t.Errorf("window %d: admitted %d, bound %d", w, n, bound)
						}
						if n < tc.limit-tc.size*replicas {
							t.Errorf("window %d: admitted only %d of %d", w, n, tc.limit)
						}
					}
					t.Logf("%d calls, admitted per window: %v (bound %d)", calls, admitted, bound)
				})
			}
		})
	}
}

// TestLeaseSize checks the lease size the store reports and takes: 1/64 of
// the limit's capacity by default, at most 65,536, 1 (no lease) under 128,
// and a set size capped by the capacity; a hot key's leases come to that
// size, and a limit too small to lease sends every unit to the shared
// store.
func TestLeaseSize(t *testing.T) {
	def := testkit.MustLeasing(testkit.MustMemory())
	set := testkit.MustLeasing(testkit.MustMemory(), leasestore.WithSize(16))
	for _, tc := range []struct {
		store *leasestore.Store
		limit core.Limit
		want  int
	}{
		{def, core.PerSecond(6400), 100},
		{def, core.PerMinute(1000), 15},
		{def, core.PerSecond(127), 1},
		{def, core.PerSecond(10).WithBurst(640), 10},
		{def, core.PerSecond(1_000_000), 15625},
		{def, core.PerMinute(60_000_000), 65536},
		{set, core.PerSecond(6400), 16},
		{set, core.PerSecond(10), 10},
	} {
		if got := tc.store.Size(tc.limit); got != tc.want {
			t.Errorf("LeaseSize(%v) = %d, want %d", tc.limit, got, tc.want)
		}
	}
	def.Close()
	set.Close()

	for _, tc := range []struct {
		limit    core.Limit
		every    time.Duration // one decision this often: hot, within the limit
		wantMost int
	}{{core.PerSecond(6400), 250 * time.Microsecond, 100}, {core.PerSecond(127), 10 * time.Millisecond, 1}} {
		clock := testkit.NewClock(testkit.Start)
		shared := &unitCounter{Store: testkit.MustMemory(memorystore.WithClock(clock.Now))}
		s := testkit.MustLeasing(shared, leasestore.WithClock(clock.Now))
		ctx := context.Background()
		decisions := 0
		for i := range 4000 {
			if i == 1000 {
				// past the first hold intervals, where the key is not yet hot
				shared.calls, decisions = 0, 0
			}
			r, err := testkit.AllowOne(s, ctx, "rk:hot:{ip:192.0.2.1}", tc.limit, 1)
			if err != nil || !r.Allowed {
				t.Fatalf("%v: decision %d: %+v, %v", tc.limit, i, r, err)
			}
			decisions++
			clock.Add(tc.every)
		}
		s.Close()
		shared.Close()
		if shared.most != tc.wantMost {
			t.Errorf("%v: largest lease %d units, want %d", tc.limit, shared.most, tc.wantMost)
		}
		if want := decisions / tc.wantMost; shared.calls < want || shared.calls > want+1 {
			t.Errorf("%v: shared store asked %d times for %d decisions, want %d", tc.limit, shared.calls, decisions, want)
		}
	}
}

// unitCounter is a Store that counts the calls it passes on and the most
// units any of them asked for.
type unitCounter struct {
	core.Store
	calls, most int
}

func (u *unitCounter) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	u.calls++
	u.most = max(u.most, n)
	return u.Store.AllowAllN(ctx, checks, n)
}

func (u *unitCounter) Close() error { return u.Store.(*memorystore.Store).Close() }

// TestLeasingColdKey checks that a key seen rarely takes no lease: the
// shared store is asked for exactly one unit per decision.
func TestLeasingColdKey(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	shared := testkit.MustMemory(memorystore.WithClock(clock.Now))
	defer shared.Close()
	s := testkit.MustLeasing(shared, leasestore.WithClock(clock.Now))
	defer s.Close()
	l := core.PerHour(10)
	ctx := context.Background()
	for i := range 5 {
		r, err := testkit.AllowOne(s, ctx, "k", l, 1)
		if err != nil || !r.Allowed || r.Remaining != 9-i {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
		clock.Add(time.Second) // one call a second: cold
	}
	// the shared store saw exactly five units
	if r, _ := testkit.AllowOne(shared, ctx, "k", l, 5); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("shared store after five cold calls: %+v", r)
	}
}

// TestLeasingWarmsUp checks that a key turning hot takes leases that grow
// with its demand at once, not one hold interval later: 200 decisions at
// one instant cost the shared store a dozen calls at most, the last ones
// full leases.
func TestLeasingWarmsUp(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	shared := &unitCounter{Store: testkit.MustMemory(memorystore.WithClock(clock.Now))}
	defer shared.Close()
	s := testkit.MustLeasing(shared, leasestore.WithClock(clock.Now))
	defer s.Close()
	limit := core.PerSecond(6400) // leases of 100
	for i := range 200 {
		if r, err := testkit.AllowOne(s, context.Background(), "rk:hot:{ip:192.0.2.1}", limit, 1); err != nil || !r.Allowed {
			t.Fatalf("decision %d: %+v, %v", i, r, err)
		}
	}
	if shared.calls > 12 || shared.most != 100 {
		t.Errorf("200 decisions: %d calls to the shared store, the largest for %d units; want at most 12, and 100", shared.calls, shared.most)
	}
}
