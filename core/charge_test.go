package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/memorystore"
)

// TestChargeIntoDebt admits requests of a 100-token budget while it is not
// in debt and charges what they cost: check, charge 70, check, charge 70,
// check. The third check is denied, with the wait until the debt is repaid
// and a unit fits, under every algorithm.
func TestChargeIntoDebt(t *testing.T) {
	for _, alg := range testkit.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			clock := testkit.NewClock(testkit.Start)
			mem := testkit.MustMemory(memorystore.WithClock(clock.Now))
			t.Cleanup(func() { mem.Close() })
			l := newLimiter(t, mem, core.WithClock(clock.Now))
			r := rule("tokens", core.PerMinute(100).WithAlgorithm(alg), "apikey:k1")
			for i := range 2 {
				d, err := check(t, l, r)
				if err != nil || !d.Allowed {
					t.Fatalf("check %d: %+v %v", i+1, d, err)
				}
				res, err := l.ChargeDecision(context.Background(), d, 70)
				if err != nil || len(res) != 1 || res[0].Charged != 70 || res[0].Rule != "tokens" {
					t.Fatalf("charge %d: %+v %v", i+1, res, err)
				}
			}
			d, err := check(t, l, r)
			if err != nil || d.Allowed || d.Results[0].RetryAfter <= 0 || d.Results[0].Remaining != 0 {
				t.Fatalf("third check after 140 of 100: %+v %v, want a denial with a wait", d, err)
			}
			p, err := l.Peek(context.Background(), r, "apikey:k1")
			if err != nil || p.Allowed {
				t.Fatalf("peek in debt: %+v %v", p, err)
			}
			if alg == core.GCRA && d.Results[0].RetryAfter != 24600*time.Millisecond {
				// 140 spent, 100 held: 41 intervals of 600 ms until a unit fits
				t.Fatalf("GCRA: RetryAfter %v, want 24.6s", d.Results[0].RetryAfter)
			}
		})
	}
}

// TestChargeUpfront: a rule whose cost is 10 admits a request while 10
// are left and spends them at once; the charge of the answer's 25 spends
// 15 more, and one of 4 gives 6 back: the up-front spend is part of the
// charge. A second charge of the same decision charges in full, and a
// refund after a charge gives nothing back.
func TestChargeUpfront(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	mem := testkit.MustMemory(memorystore.WithClock(clock.Now))
	t.Cleanup(func() { mem.Close() })
	l := newLimiter(t, mem, core.WithClock(clock.Now))
	r := rule("tokens", core.PerHour(100), "apikey:k2")
	r.Cost = func(core.Request) int { return 10 }
	ctx := context.Background()
	left := func() int {
		t.Helper()
		p, err := l.Peek(ctx, r, "apikey:k2")
		if err != nil {
			t.Fatal(err)
		}
		return p.Remaining
	}
	d, err := check(t, l, r)
	if err != nil || !d.Allowed || left() != 90 {
		t.Fatalf("check: %+v %v, %d left", d, err, left())
	}
	if res, err := l.ChargeDecision(ctx, d, 25); err != nil || res[0].Charged != 25 || left() != 75 {
		t.Fatalf("charge of 25 after 10 up front: %+v %v, %d left, want 75", res, err, left())
	}
	if res, err := l.ChargeDecision(ctx, d, 5); err != nil || res[0].Charged != 5 || left() != 70 {
		t.Fatalf("second charge of the decision: %+v %v, %d left, want 70", res, err, left())
	}
	if err := l.Refund(ctx, d); err != nil || left() != 70 {
		t.Fatalf("refund after a charge: %v, %d left, want 70", err, left())
	}
	d, _ = check(t, l, r)
	if res, err := l.ChargeDecision(ctx, d, 4); err != nil || res[0].Charged != 4 || left() != 66 {
		t.Fatalf("charge of 4 after 10 up front: %+v %v, %d left, want 66", res, err, left())
	}
}

// TestChargeInput: fewer than no units are refused, no units spend
// nothing, and a charge past the debt bound spends what fits and says so.
func TestChargeInput(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	mem := testkit.MustMemory(memorystore.WithClock(clock.Now))
	t.Cleanup(func() { mem.Close() })
	l := newLimiter(t, mem, core.WithClock(clock.Now))
	r := rule("tokens", core.PerMinute(100), "apikey:k3")
	ctx := context.Background()
	if _, err := l.Charge(ctx, r, "apikey:k3", -1); !errors.Is(err, core.ErrInvalidCost) {
		t.Fatalf("charge of -1: %v, want ErrInvalidCost", err)
	}
	d, _ := check(t, l, r)
	if _, err := l.ChargeDecision(ctx, d, -5); !errors.Is(err, core.ErrInvalidCost) {
		t.Fatalf("ChargeDecision of -5: %v, want ErrInvalidCost", err)
	}
	if res, err := l.Charge(ctx, r, "apikey:k3", 0); err != nil || res.Charged != 0 || res.Remaining != 99 {
		t.Fatalf("charge of 0: %+v %v, want nothing spent", res, err)
	}
	res, err := l.Charge(ctx, r, "apikey:k3", int(^uint(0)>>1))
	want := 100 + core.MaxDebtPeriods*100 - 1
	if err != nil || res.Charged != want || res.Allowed {
		t.Fatalf("charge of MaxInt: %+v %v, want %d charged", res, err, want)
	}
	if res.RetryAfter != time.Duration(core.MaxDebtPeriods)*time.Minute+600*time.Millisecond {
		t.Fatalf("charge to the bound: RetryAfter %v, want %d periods and an interval", res.RetryAfter, core.MaxDebtPeriods)
	}
}

// TestChargeFailure: a charge the store cannot take goes through the
// failure policy, and is told to the observer and OnError: the fallback
// store takes it under FailLocal (its next decision is denied), nothing
// does under FailOpen, and FailClosed returns ErrUnavailable.
func TestChargeFailure(t *testing.T) {
	for _, p := range []core.FailurePolicy{core.FailLocal, core.FailOpen, core.FailClosed} {
		t.Run(p.String(), func(t *testing.T) {
			obs := &recorder{}
			var reported []error
			l := newLimiter(t, chargeDown{}, core.WithFailurePolicy(p), core.WithObserver(obs),
				core.OnError(func(err error) { reported = append(reported, err) }))
			r := rule("tokens", core.PerMinute(100), "apikey:k4")
			res, err := l.Charge(context.Background(), r, "apikey:k4", 150)
			switch p {
			case core.FailLocal:
				if err != nil || res.Charged != 150 || !res.Degraded {
					t.Fatalf("charge: %+v %v, want 150 charged locally", res, err)
				}
				if d, _ := check(t, l, r); d.Allowed {
					t.Fatalf("check after a local charge of 150 of 100: %+v, want a denial", d)
				}
			case core.FailOpen:
				if err != nil || res.Charged != 0 || !res.Degraded {
					t.Fatalf("charge: %+v %v, want nothing charged", res, err)
				}
			case core.FailClosed:
				if !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, errDown) {
					t.Fatalf("charge: %+v %v, want ErrUnavailable", res, err)
				}
			}
			obs.mu.Lock()
			calls := append([]error(nil), obs.calls...)
			obs.mu.Unlock()
			if len(calls) == 0 || !errors.Is(calls[0], errDown) {
				t.Fatalf("observer heard %v, want the charge's failure", calls)
			}
			if len(reported) == 0 || !errors.Is(reported[0], errDown) {
				t.Fatalf("OnError heard %v, want the charge's failure", reported)
			}
		})
	}
}

// chargeDown is a ChargeStore whose every call fails.
type chargeDown struct{ downStore }

func (chargeDown) ChargeAllN(context.Context, []core.Check, int) ([]core.ChargeResult, error) {
	return nil, errDown
}

func TestChargeNeedsAChargeStore(t *testing.T) {
	l := newLimiter(t, downStore{})
	r := rule("tokens", core.PerMinute(5), "apikey:k5")
	if _, err := l.Charge(context.Background(), r, "apikey:k5", 3); !errors.Is(err, core.ErrNotSupported) {
		t.Fatalf("Charge over a store without charges: %v, want ErrNotSupported", err)
	}
}
