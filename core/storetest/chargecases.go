package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/core"
)

// chargeCases are the cases of [core.ChargeStore]'s method, run only on a
// store that implements it.
var chargeCases = []testCase{
	{"ChargeIntoDebt", true, false, chargeIntoDebt},
	{"ChargeBounded", true, false, chargeBounded},
	{"ChargeInvalid", false, false, chargeInvalid},
	{"ChargeRepaid", true, true, chargeRepaid},
}

// charger returns the store under test as a ChargeStore, or skips the
// case.
func (h *harness) charger() core.ChargeStore {
	h.t.Helper()
	c, ok := h.store.(core.ChargeStore)
	if !ok {
		h.t.Skipf("storetest: %T is not a core.ChargeStore", h.store)
	}
	return c
}

// charge runs ChargeAllN on one key, checks its result as a peek's, and
// that it charged want units.
func (h *harness) charge(key string, l core.Limit, n, want int) core.Result {
	h.t.Helper()
	res, err := h.charger().ChargeAllN(h.t.Context(), []core.Check{{Key: key, Limit: l}}, n)
	if err != nil {
		h.t.Fatalf("ChargeAllN(%q %v, %d): %v", key, l, n, err)
	}
	if len(res) != 1 {
		h.t.Fatalf("ChargeAllN(%q %v, %d): %d results for 1 check", key, l, n, len(res))
	}
	if err := peekShape(l, []core.Result{res[0].Result}); err != nil {
		h.t.Fatalf("ChargeAllN(%q %v, %d): %v", key, l, n, err)
	}
	if res[0].Charged != want {
		h.t.Fatalf("ChargeAllN(%q %v, %d): charged %d, want %d", key, l, n, res[0].Charged, want)
	}
	return res[0].Result
}

// debtBound is how many units a full key of l takes in one charge: its
// capacity and MaxDebtPeriods × rate more, but for a sliding log, which
// holds at most twice its rate.
func debtBound(l core.Limit) int {
	if l.Algorithm == core.SlidingWindowLog {
		return 2 * l.Rate
	}
	return l.Capacity() + core.MaxDebtPeriods*l.Rate
}

// chargeIntoDebt spends 3 of 10, then charges 15 whatever is left: the
// charge lands whole, the key is in debt and denies every cost, and a
// second charge lands too, while another identity's key is untouched.
func chargeIntoDebt(h *harness, alg core.Algorithm) {
	w := h.quiet()
	l := core.Limit{Rate: 10, Period: w.period, Burst: 10, Algorithm: alg}
	key := h.key("charge")
	h.expect("cost 3", h.one(key, l, 3), true, 7)
	r := h.charge(key, l, 15, 15)
	h.expect("charge of 15 with 7 left", r, false, 0)
	h.expect("peek in debt", h.peek(key, l), false, 0)
	d := h.one(key, l, 1)
	h.expect("a unit in debt", d, false, 0)
	if d.RetryAfter <= 0 || d.ResetAfter <= 0 {
		h.t.Fatalf("a unit in debt: %+v, want a positive RetryAfter and ResetAfter", d)
	}
	h.charge(key, l, 2, 2)
	h.expect("a unit after a second charge", h.one(key, l, 1), false, 0)
	other := h.otherKey("charge")
	h.expect("charge of 4 on a fresh key", h.charge(other, l, 4, 4), true, 6)
	h.expect("cost 6 after it", h.one(other, l, 6), true, 0)
}

// chargeBounded charges far more than a key can owe: the charge spends what
// the debt bound allows and says so, and a charge of a key at its bound
// spends nothing.
func chargeBounded(h *harness, alg core.Algorithm) {
	w := h.quiet()
	l := core.Limit{Rate: 10, Period: w.period, Burst: 10, Algorithm: alg}
	key := h.key("bound")
	bound := debtBound(l)
	h.expect("a charge past the bound", h.charge(key, l, 1<<50, bound), false, 0)
	h.charge(key, l, 1, 0)
	h.expect("a unit at the bound", h.one(key, l, 1), false, 0)
	other := h.otherKey("bound")
	h.charge(other, l, bound, bound)
	h.charge(other, l, 3, 0)
}

// chargeInvalid charges what no store may take: no units, fewer than none,
// no checks.
func chargeInvalid(h *harness, _ core.Algorithm) {
	l := core.PerMinute(10)
	key := h.key("badcharge")
	for _, n := range []int{0, -1, -1 << 40} {
		_, err := h.charger().ChargeAllN(h.t.Context(), []core.Check{{Key: key, Limit: l}}, n)
		if !errors.Is(err, core.ErrInvalidCost) {
			h.t.Fatalf("ChargeAllN(%d units): %v, want an error wrapping ErrInvalidCost", n, err)
		}
	}
	if _, err := h.charger().ChargeAllN(h.t.Context(), nil, 1); err == nil {
		h.t.Fatal("ChargeAllN of no checks: no error")
	}
	if _, err := h.charger().ChargeAllN(h.t.Context(), []core.Check{{Key: key, Limit: core.Limit{}}}, 1); !errors.Is(err, core.ErrInvalidLimit) {
		h.t.Fatalf("ChargeAllN of an invalid limit: %v, want an error wrapping ErrInvalidLimit", err)
	}
}

// chargeRepaid charges 25 to a key of 10 per minute (20, a sliding log's
// bound, to a sliding log): a unit is denied
// until the RetryAfter the key reports, and allowed from then on, as the
// algorithm repays the debt.
func chargeRepaid(h *harness, alg core.Algorithm) {
	l := core.PerMinute(10).WithAlgorithm(alg)
	key := h.key("repaid")
	r := h.charge(key, l, 25, min(25, debtBound(l)))
	wait := r.RetryAfter
	if alg == core.GCRA {
		// 25 intervals spent, 10 held: a unit fits after 16
		h.wantRetry("charge of 25", r, 16*6*time.Second)
	}
	if wait <= time.Microsecond || wait > 2*time.Minute+time.Second {
		h.t.Fatalf("charge of 25: RetryAfter %v, want within (1µs, 2m]: %+v", wait, r)
	}
	before, after := time.Microsecond, time.Duration(0)
	if alg == core.FixedWindow {
		before, after = fixedSlack, fixedSlack
	}
	h.step(wait - before)
	if r := h.one(key, l, 1); r.Allowed {
		h.t.Fatalf("allowed %v before the debt's RetryAfter of %v: %+v", before, wait, r)
	}
	h.step(before + after)
	if r := h.one(key, l, 1); !r.Allowed {
		h.t.Fatalf("denied at the debt's RetryAfter of %v: %+v", wait, r)
	}
	h.step(core.MaxDebtPeriods * time.Minute)
	h.expect(fmt.Sprintf("the whole capacity after %d periods", core.MaxDebtPeriods), h.one(key, l, 10), true, 0)
}
