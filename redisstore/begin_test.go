package redisstore_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// TestBeginFinishAsAllowInto: a call begun and finished apart decides as
// AllowInto does, for every algorithm: twin keys, one called each way,
// give the same results call after call, up to the limit and past it.
func TestBeginFinishAsAllowInto(t *testing.T) {
	srv := redistest.StartServer(t)
	s := testkit.MustRedis(srv.Client(t))
	defer s.Close()
	ctx := context.Background()
	for _, alg := range testkit.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			limit := core.PerHour(5).WithAlgorithm(alg)
			begun := core.Check{Key: testkit.UniqueKey(t, "begun"), Limit: limit}
			into := core.Check{Key: testkit.UniqueKey(t, "into"), Limit: limit}
			for i, n := range []int{1, 2, 1, 1, 1, 3} {
				call := s.Begin(ctx, begun, n)
				if call == nil {
					t.Fatalf("call %d: not begun", i)
				}
				got, err := s.Finish(ctx, call, begun, n)
				if err != nil {
					t.Fatalf("call %d: Finish: %v", i, err)
				}
				var want [1]core.Result
				if err := s.AllowInto(ctx, []core.Check{into}, n, want[:]); err != nil {
					t.Fatalf("call %d: AllowInto: %v", i, err)
				}
				if got.Allowed != want[0].Allowed || got.Remaining != want[0].Remaining || got.Limit != want[0].Limit || got.Never() != want[0].Never() {
					t.Fatalf("call %d at cost %d: begun and finished %+v, AllowInto %+v", i, n, got, want[0])
				}
			}
		})
	}
}

// TestBeginExact: 64 goroutines begin and finish calls on one key with
// room for 50: exactly 50 are allowed, as through AllowInto.
func TestBeginExact(t *testing.T) {
	srv := redistest.StartServer(t)
	s := testkit.MustRedis(srv.Client(t))
	defer s.Close()
	ctx := context.Background()
	check := core.Check{Key: testkit.UniqueKey(t, "exact"), Limit: core.PerHour(50)}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 2 {
				call := s.Begin(ctx, check, 1)
				if call == nil {
					t.Error("not begun")
					return
				}
				r, err := s.Finish(ctx, call, check, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != 50 {
		t.Fatalf("%d of 128 allowed, want exactly 50", got)
	}
}

// TestBeginDeclines: Begin begins no call that AllowInto would refuse or
// that does not go through the batcher, so that its caller calls AllowInto,
// which says why; and Finish refuses what Begin did not begin.
func TestBeginDeclines(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	s := testkit.MustRedis(c)
	defer s.Close()
	ctx := context.Background()
	key := testkit.UniqueKey(t, "declines")
	limit := core.PerHour(5)
	cases := []struct {
		name  string
		store *redisstore.Store
		check core.Check
		n     int
	}{
		{"cost 0", s, core.Check{Key: key, Limit: limit}, 0},
		{"empty key", s, core.Check{Limit: limit}, 1},
		{"invalid limit", s, core.Check{Key: key}, 1},
		{"override", s, core.Check{Key: key, Limit: limit, Override: key + ":override"}, 1},
		{"not batching", testkit.MustRedis(c, redisstore.WithoutBatching()), core.Check{Key: key, Limit: limit}, 1},
	}
	for _, tc := range cases {
		if call := tc.store.Begin(ctx, tc.check, tc.n); call != nil {
			t.Errorf("%s: Begin began %T, want nil", tc.name, call)
			_, _ = tc.store.Finish(ctx, call, tc.check, tc.n) // a call begun holds its pipeline until finished
		}
	}
	closed := testkit.MustRedis(c)
	closed.Close()
	if call := closed.Begin(ctx, core.Check{Key: key, Limit: limit}, 1); call != nil {
		t.Errorf("closed store: Begin began %T, want nil", call)
	}
	if _, err := s.Finish(ctx, "call", core.Check{Key: key, Limit: limit}, 1); err == nil || !strings.Contains(err.Error(), "not a call Begin began") {
		t.Errorf("Finish of a string: %v, want an error", err)
	}
}
