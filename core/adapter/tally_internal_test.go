package adapter

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/memorystore"
)

// newClockLimiter returns a Limiter over a fresh MemoryStore, both on the
// clock now, closed when the test ends.
func newClockLimiter(t *testing.T, now func() time.Time) *core.Limiter {
	t.Helper()
	store, err := memorystore.New(memorystore.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	l, err := core.NewLimiter(store, core.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// refunded predicts what the store holds once a decision's units are given
// back: what Peek reads after a real Refund, for every algorithm, quota
// spent and cost. The window algorithms' reset is an upper bound where the
// store keeps older units (a sliding window's).
func TestRefundedMatchesStore(t *testing.T) {
	now := time.Unix(1_700_000_010, 250_000_000)
	clock := func() time.Time { return now }
	req := HTTPRequest(httptest.NewRequest("GET", "/", nil))
	for _, alg := range []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		for _, tc := range []struct{ spent, cost int }{{0, 1}, {2, 1}, {0, 3}, {4, 2}, {8, 2}, {9, 1}} {
			t.Run(fmt.Sprintf("%v/spent=%d/cost=%d", alg, tc.spent, tc.cost), func(t *testing.T) {
				l := newClockLimiter(t, clock)
				lim := core.Limit{Rate: 10, Period: time.Minute, Burst: 10, Algorithm: alg}
				key := func(core.Request) (string, error) { return "id:x", nil }
				spend := core.Rule{Name: "r", Limit: lim, Key: key}
				for range tc.spent {
					if _, err := l.Check(context.Background(), req, []core.Rule{spend}); err != nil {
						t.Fatal(err)
					}
				}
				rule := spend
				rule.Cost = func(core.Request) int { return tc.cost }
				d, err := l.Check(context.Background(), req, []core.Rule{rule})
				if err != nil || !d.Allowed {
					t.Fatalf("check: %+v, %v", d, err)
				}
				got := refunded(d.Results[0].Result, tc.cost)
				if err := l.Refund(context.Background(), d); err != nil {
					t.Fatal(err)
				}
				want, err := l.Peek(context.Background(), spend, "id:x")
				if err != nil {
					t.Fatal(err)
				}
				if got.Remaining != want.Remaining {
					t.Errorf("remaining %d, the store's %d", got.Remaining, want.Remaining)
				}
				exact := alg == core.GCRA || alg == core.FixedWindow || got.Remaining == lim.Capacity()
				if exact && got.ResetAfter != want.ResetAfter || got.ResetAfter < want.ResetAfter {
					t.Errorf("reset %v, the store's %v", got.ResetAfter, want.ResetAfter)
				}
			})
		}
	}
}
