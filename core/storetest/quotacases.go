package storetest

import (
	"fmt"
	"time"

	"github.com/ratekit/ratekit/core"
)

// quotaCases are the cases of [core.QuotaStore]'s methods, run only on a
// store that implements it.
var quotaCases = []testCase{
	{"PeekSpendsNothing", true, false, peekSpendsNothing},
	{"RefundGivesBack", true, false, refundGivesBack},
	{"RefundNeverPastFull", true, false, refundNeverPastFull},
	{"ResetMakesFull", true, false, resetMakesFull},
	{"LimitRaised", true, false, limitRaised},
	{"LimitLoweredLive", true, false, limitLoweredLive},
	{"RefundToItsSpend", true, true, refundToItsSpend},
}

// quota returns the store under test as a QuotaStore, or skips the case.
func (h *harness) quota() core.QuotaStore {
	h.t.Helper()
	q, ok := h.store.(core.QuotaStore)
	if !ok {
		h.t.Skipf("storetest: %T is not a core.QuotaStore", h.store)
	}
	return q
}

// peek runs PeekAll on one key and checks the promises of a peek's result.
func (h *harness) peek(key string, l core.Limit) core.Result {
	h.t.Helper()
	res, err := h.quota().PeekAll(h.t.Context(), []core.Check{{Key: key, Limit: l}})
	if err != nil {
		h.t.Fatalf("PeekAll(%q %v): %v", key, l, err)
	}
	if err := peekShape(l, res); err != nil {
		h.t.Fatalf("PeekAll(%q %v): %v", key, l, err)
	}
	return res[0]
}

// refund runs RefundAllN on one key and checks its result as a peek's.
func (h *harness) refund(key string, l core.Limit, n int) core.Result {
	h.t.Helper()
	return h.refundWithin(key, l, n, 0)
}

// refundWithin runs RefundAllN on one key with the check's ResetAfter
// bound, and checks its result as a peek's.
func (h *harness) refundWithin(key string, l core.Limit, n int, bound time.Duration) core.Result {
	h.t.Helper()
	res, err := h.quota().RefundAllN(h.t.Context(), []core.Check{{Key: key, Limit: l, ResetAfter: bound}}, n)
	if err != nil {
		h.t.Fatalf("RefundAllN(%q %v, %d, ResetAfter %v): %v", key, l, n, bound, err)
	}
	if err := peekShape(l, res); err != nil {
		h.t.Fatalf("RefundAllN(%q %v, %d, ResetAfter %v): %v", key, l, n, bound, err)
	}
	return res[0]
}

// peekShape checks what every answer of a peek promises: one result, for
// the limit, allowed exactly when a unit is left, RetryAfter 0 when allowed
// and positive when not, ResetAfter never negative.
func peekShape(l core.Limit, res []core.Result) error {
	if len(res) != 1 {
		return fmt.Errorf("%d results for 1 check", len(res))
	}
	r := res[0]
	switch {
	case r.Limit != l:
		return fmt.Errorf("result %+v is for limit %v, want %v", r, r.Limit, l)
	case r.Remaining < 0 || r.Remaining > l.Capacity():
		return fmt.Errorf("result %+v has Remaining outside [0, %d]", r, l.Capacity())
	case r.Allowed != (r.Remaining >= 1):
		return fmt.Errorf("result %+v: Allowed must say whether a unit is left", r)
	case r.Allowed && r.RetryAfter != 0 || !r.Allowed && r.RetryAfter <= 0:
		return fmt.Errorf("result %+v: RetryAfter must be 0 when a unit is left, else positive", r)
	case r.ResetAfter < 0:
		return fmt.Errorf("result %+v has ResetAfter < 0", r)
	}
	return nil
}

// peekSpendsNothing peeks at a fresh key, spends a unit, peeks twice and
// spends again: peeks report what is left and spend nothing; a spent key
// peeks as denied.
func peekSpendsNothing(h *harness, alg core.Algorithm) {
	w := h.quiet()
	l := core.Limit{Rate: 4, Period: w.period, Burst: 4, Algorithm: alg}
	key := h.key("peek")
	r := h.peek(key, l)
	h.expect("peek at a fresh key", r, true, 4)
	if r.ResetAfter != 0 {
		h.t.Fatalf("peek at a fresh key: ResetAfter %v, want 0 (the key is full)", r.ResetAfter)
	}
	h.expect("unit 1", h.one(key, l, 1), true, 3)
	for i := range 2 {
		r := h.peek(key, l)
		h.expect(fmt.Sprintf("peek %d after unit 1", i+1), r, true, 3)
		if r.ResetAfter <= 0 {
			h.t.Fatalf("peek after a unit: ResetAfter %v, want > 0", r.ResetAfter)
		}
	}
	h.expect("unit 2, after two peeks", h.one(key, l, 1), true, 2)
	h.expect("unit 3", h.one(key, l, 1), true, 1)
	h.expect("unit 4", h.one(key, l, 1), true, 0)
	h.expect("peek at a spent key", h.peek(key, l), false, 0)
	h.expect("peek at another identity's key", h.peek(h.otherKey("peek"), l), true, 4)
}

// refundGivesBack spends 3 of 10 and refunds 2: one remains spent.
func refundGivesBack(h *harness, alg core.Algorithm) {
	w := h.quiet()
	l := core.Limit{Rate: 10, Period: w.period, Burst: 10, Algorithm: alg}
	key := h.key("refund")
	h.expect("cost 3", h.one(key, l, 3), true, 7)
	h.expect("refund of 2", h.refund(key, l, 2), true, 9)
	h.expect("peek after the refund", h.peek(key, l), true, 9)
	h.expect("cost 9 after the refund", h.one(key, l, 9), true, 0)
	h.expect("a unit more", h.one(key, l, 1), false, 0)
	h.expect("refund of 1 to a spent key", h.refund(key, l, 1), true, 1)
	h.expect("the unit given back", h.one(key, l, 1), true, 0)
}

// refundNeverPastFull refunds more than was spent: the key is full, never
// more.
func refundNeverPastFull(h *harness, alg core.Algorithm) {
	w := h.quiet()
	l := core.Limit{Rate: 4, Period: w.period, Burst: 4, Algorithm: alg}
	key := h.key("overfull")
	h.expect("refund of 3 to a fresh key", h.refund(key, l, 3), true, 4)
	h.expect("unit 1", h.one(key, l, 1), true, 3)
	h.expect("refund of 5 after 1", h.refund(key, l, 5), true, 4)
	h.expect("the whole capacity", h.one(key, l, 4), true, 0)
	h.expect("a unit more", h.one(key, l, 1), false, 0)
}

// resetMakesFull spends a key, resets it, and finds it full.
func resetMakesFull(h *harness, alg core.Algorithm) {
	w := h.quiet()
	l := core.Limit{Rate: 4, Period: w.period, Burst: 4, Algorithm: alg}
	key, other := h.key("reset"), h.otherKey("reset")
	h.expect("the whole capacity", h.one(key, l, 4), true, 0)
	h.expect("another identity's unit", h.one(other, l, 1), true, 3)
	h.expect("a unit more", h.one(key, l, 1), false, 0)
	if err := h.quota().Reset(h.t.Context(), key); err != nil {
		h.t.Fatalf("Reset(%q): %v", key, err)
	}
	r := h.peek(key, l)
	h.expect("peek after the reset", r, true, 4)
	if r.ResetAfter != 0 {
		h.t.Fatalf("peek after the reset: ResetAfter %v, want 0", r.ResetAfter)
	}
	h.expect("the whole capacity after the reset", h.one(key, l, 4), true, 0)
	h.expect("another identity's key, not reset", h.peek(other, l), true, 3)
	if err := h.quota().Reset(h.t.Context(), h.otherKey("never-used")); err != nil {
		h.t.Fatalf("Reset of a key never used: %v", err)
	}
}

// limitRaised spends 10 of 10 per period, then asks under 20 per period,
// as after a live reconfiguration: 10 remain.
func limitRaised(h *harness, alg core.Algorithm) {
	w := h.quiet()
	low := core.Limit{Rate: 10, Period: w.period, Burst: 10, Algorithm: alg}
	high := core.Limit{Rate: 20, Period: w.period, Burst: 20, Algorithm: alg}
	key := h.key("raised")
	h.expect("10 of 10", h.one(key, low, 10), true, 0)
	h.expect("a unit under 20", h.one(key, high, 1), true, 9)
	h.expect("peek under 20", h.peek(key, high), true, 9)
	for i := range 9 {
		h.expect(fmt.Sprintf("unit %d more under 20", i+2), h.one(key, high, 1), true, 8-i)
	}
	h.expect("a unit more under 20", h.one(key, high, 1), false, 0)
	other := h.otherKey("raised")
	h.expect("10 of 10, another key", h.one(other, low, 10), true, 0)
	h.expect("peek under 20, another key", h.peek(other, high), true, 10)
}

// limitLoweredLive spends 15 of 20 per period, then asks under 10 per
// period: denied until enough has refilled. On a clock the suite steps,
// GCRA's wait is exact: 15 units outstanding at the new interval of
// period/10, less the new tolerance of a period, plus one interval.
func limitLoweredLive(h *harness, alg core.Algorithm) {
	w := h.quiet()
	high := core.Limit{Rate: 20, Period: w.period, Burst: 20, Algorithm: alg}
	low := core.Limit{Rate: 10, Period: w.period, Burst: 10, Algorithm: alg}
	key := h.key("lowered-live")
	h.expect("15 of 20", h.one(key, high, 15), true, 5)
	r := h.one(key, low, 1)
	h.expect("a unit under 10", r, false, 0)
	other := h.otherKey("lowered-live")
	h.expect("15 of 20, another key", h.one(other, high, 15), true, 5)
	h.expect("peek under 10, another key", h.peek(other, low), false, 0)
	if alg != core.GCRA {
		return
	}
	want := w.period * 6 / 10
	// what the clock ran between the two calls is spent at the old
	// interval and counted at the new one, twice as long
	if h.cfg.leasing {
		h.wantRetry("a unit under 10", r, want)
	} else {
		h.nearScaled("a unit under 10: RetryAfter", r, r.RetryAfter, want, 2)
	}
	if h.advance == nil {
		return
	}
	h.step(want - time.Microsecond)
	h.expect("a unit under 10, a µs early", h.one(key, low, 1), false, 0)
	h.step(time.Microsecond)
	h.expect("a unit under 10, once refilled", h.one(key, low, 1), true, 0)
}

// beforeEdge steps the clock to before ahead of the end of the current
// window of period (as the fixed window and the sliding counter align
// them), read from a fresh sliding-counter key, whose ResetAfter is the
// window's end plus a period, to the microsecond.
func (h *harness) beforeEdge(period, before time.Duration) {
	h.t.Helper()
	l := core.Limit{Rate: 1, Period: period, Burst: 1, Algorithm: core.SlidingWindowCounter}
	left := h.one(h.otherKey("edge"), l, 1).ResetAfter - period
	if left < before {
		left += period
	}
	h.step(left - before)
}

// refundToItsSpend spends, steps the clock, spends again and refunds the
// first spend with its ResetAfter as a Limiter ages it (less the time
// since), here 100 ms or 10 ms late as a slow reply makes it: the units go
// back to what they were spent in, never to what came after. A fixed
// window spent 100 ms before its edge gives nothing back once the window
// is over; a sliding counter gives back to the previous window's count,
// not the current one's; a sliding log removes the member it admitted, not
// a later one, and units it admits in the same instant stay distinct; a
// GCRA key gets its units back. A bound already past gives
// back nothing; a bound of 0 sets none, as before.
func refundToItsSpend(h *harness, alg core.Algorithm) {
	key := h.key("refund-spend")
	switch alg {
	case core.FixedWindow:
		refundFixedToItsWindow(h, key)
	case core.SlidingWindowCounter:
		refundCounterToItsWindow(h, key)
	case core.SlidingWindowLog:
		refundLogToItsMember(h, key)
	default:
		refundGCRAToItsSpend(h, key, alg)
	}
}

// refundFixedToItsWindow: a fixed window's unit spent before the edge
// gives nothing back once its window is over; one of the current window
// does, within its bound.
func refundFixedToItsWindow(h *harness, key string) {
	l := core.Limit{Rate: 3, Period: time.Second, Burst: 3, Algorithm: core.FixedWindow}
	h.beforeEdge(l.Period, 100*time.Millisecond)
	first := h.one(key, l, 1)
	h.expect("a unit 100 ms before the edge", first, true, 2)
	h.step(150 * time.Millisecond)
	var last core.Result
	for i := range 3 {
		last = h.one(key, l, 1)
		h.expect(fmt.Sprintf("unit %d of the next window", i+1), last, true, 2-i)
	}
	late := first.ResetAfter - 150*time.Millisecond + 300*time.Millisecond
	h.expect("the refund of the unit of the window over", h.refundWithin(key, l, 1, late), false, 0)
	h.expect("the refund of a unit of this window", h.refundWithin(key, l, 1, last.ResetAfter), true, 1)
	h.expect("a refund whose bound is past", h.refundWithin(key, l, 1, -time.Millisecond), true, 1)
	h.expect("a refund without a bound", h.refundWithin(key, l, 1, 0), true, 2)
}

// refundCounterToItsWindow: a sliding counter's refund goes to the window
// its units were spent in, the previous one's count or the current one's.
func refundCounterToItsWindow(h *harness, key string) {
	l := core.Limit{Rate: 10, Period: time.Second, Burst: 10, Algorithm: core.SlidingWindowCounter}
	h.beforeEdge(l.Period, 100*time.Millisecond)
	first := h.one(key, l, 5)
	h.expect("5 units 100 ms before the edge", first, true, 5)
	h.step(150 * time.Millisecond)
	// the 5 of the previous window weigh 4.75
	second := h.one(key, l, 5)
	h.expect("5 units 50 ms into the next window", second, true, 0)
	late := first.ResetAfter - 150*time.Millisecond + 100*time.Millisecond
	h.expect("the refund of the previous window's 5", h.refundWithin(key, l, 5, late), true, 5)
	h.step(800 * time.Millisecond)
	h.expect("850 ms into the window, its own 5 still spent", h.peek(key, l), true, 5)
	h.expect("a refund whose bound is past", h.refundWithin(key, l, 5, -time.Millisecond), true, 5)
	h.expect("the refund of this window's 5", h.refundWithin(key, l, 5, second.ResetAfter-800*time.Millisecond), true, 10)
}

// refundLogToItsMember: a sliding log's refund removes the member it
// admitted, not a later one, and units admitted in one instant stay
// distinct.
func refundLogToItsMember(h *harness, key string) {
	l := core.Limit{Rate: 3, Period: time.Second, Burst: 3, Algorithm: core.SlidingWindowLog}
	first := h.one(key, l, 1)
	h.expect("a unit", first, true, 2)
	h.step(300 * time.Millisecond)
	second := h.one(key, l, 2)
	h.expect("2 units 300 ms later", second, true, 0)
	late := first.ResetAfter - 300*time.Millisecond + 10*time.Millisecond
	h.expect("the refund of the first unit", h.refundWithin(key, l, 1, late), true, 1)
	// units of one instant stay distinct after a refund took an
	// older one from under them
	h.expect("a unit in the instant of the refund", h.one(key, l, 1), true, 0)
	h.expect("a unit more in that instant", h.one(key, l, 1), false, 0)
	h.step(750 * time.Millisecond)
	h.expect("once the first unit would have left the log", h.peek(key, l), false, 0)
	h.expect("a refund whose bound is past", h.refundWithin(key, l, 1, -time.Millisecond), false, 0)
	h.expect("the refund of a later unit", h.refundWithin(key, l, 1, second.ResetAfter-750*time.Millisecond), true, 1)
	h.expect("a refund without a bound", h.refundWithin(key, l, 1, 0), true, 2)
}

// refundGCRAToItsSpend: a GCRA key gets its units back within the bound.
func refundGCRAToItsSpend(h *harness, key string, alg core.Algorithm) {
	l := core.Limit{Rate: 3, Period: time.Second, Burst: 3, Algorithm: alg}
	first := h.one(key, l, 1)
	h.expect("a unit", first, true, 2)
	h.step(100 * time.Millisecond)
	h.expect("2 units 100 ms later", h.one(key, l, 2), true, 0)
	h.expect("the refund of the first unit", h.refundWithin(key, l, 1, first.ResetAfter-100*time.Millisecond), true, 1)
	h.expect("a refund whose bound is past", h.refundWithin(key, l, 1, -time.Millisecond), true, 1)
	h.expect("a refund without a bound", h.refundWithin(key, l, 1, 0), true, 2)
}
