package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/core"
)

// invalidInput sends calls the store must refuse with an error, wrapping
// the sentinel error of core that says what is wrong, before spending
// anything: not even the valid checks of a refused call are spent.
func invalidInput(h *harness, _ core.Algorithm) {
	key := h.key("invalid")
	ok := core.PerHour(3)
	one := func(l core.Limit) []core.Check { return []core.Check{{Key: key, Limit: l}} }
	withValid := func(c core.Check) []core.Check { return []core.Check{{Key: key, Limit: ok}, c} }
	for _, c := range []struct {
		name   string
		checks []core.Check
		n      int
		want   error
	}{
		{"zero rate", one(core.PerSecond(0)), 1, core.ErrInvalidLimit},
		{"negative rate", one(core.PerSecond(-3)), 1, core.ErrInvalidLimit},
		{"rate above MaxRate", one(core.Limit{Rate: core.MaxRate + 1, Period: time.Hour, Burst: 1, Algorithm: core.FixedWindow}), 1, core.ErrInvalidLimit},
		{"zero period", one(core.Limit{Rate: 1, Burst: 1}), 1, core.ErrInvalidLimit},
		{"negative period", one(core.Limit{Rate: 1, Period: -time.Second, Burst: 1}), 1, core.ErrInvalidLimit},
		{"sub-millisecond period", one(core.Limit{Rate: 1, Period: 1500 * time.Microsecond, Burst: 1}), 1, core.ErrInvalidLimit},
		{"period above MaxPeriod", one(core.Limit{Rate: 1, Period: core.MaxPeriod + time.Millisecond, Burst: 1}), 1, core.ErrInvalidLimit},
		{"zero burst", one(core.PerSecond(5).WithBurst(0)), 1, core.ErrInvalidLimit},
		{"unknown algorithm", one(core.PerSecond(1).WithAlgorithm(9)), 1, core.ErrInvalidLimit},
		{"zero cost", one(ok), 0, core.ErrInvalidCost},
		{"negative cost", one(ok), -1, core.ErrInvalidCost},
		{"empty key", []core.Check{{Key: "", Limit: ok}}, 1, core.ErrInvalidIdentity},
		{"an invalid limit after a valid check", withValid(core.Check{Key: h.key("invalid-2"), Limit: core.PerSecond(0)}), 1, core.ErrInvalidLimit},
		{"an empty key after a valid check", withValid(core.Check{Key: "", Limit: ok}), 1, core.ErrInvalidIdentity},
		{"zero cost on two checks", withValid(core.Check{Key: h.key("invalid-2"), Limit: ok}), 0, core.ErrInvalidCost},
	} {
		if err := h.inputErr(c.checks, c.n); err != nil && !errors.Is(err, c.want) {
			h.t.Errorf("%s: err = %v, want one wrapping %v", c.name, err, c.want)
		}
	}
	h.inputErr(nil, 1)
	h.inputErr([]core.Check{}, 1)
	h.expect("the valid key after the refused calls", h.one(key, ok, 3), true, 0)
	h.expect("the other valid key", h.one(h.key("invalid-2"), ok, 3), true, 0)
}

// retryAfter spends a key, then steps the clock to its RetryAfter: a
// microsecond early (a fixed window: 2ms) the unit is still denied, on
// time (a fixed window: within 1ms after) it is allowed, and
// after two quiet periods the whole capacity is back.
func retryAfter(h *harness, alg core.Algorithm) {
	l := core.PerMinute(6).WithAlgorithm(alg)
	key := h.key("retry")
	for i := range 6 {
		h.expect(fmt.Sprintf("unit %d of 6", i+1), h.one(key, l, 1), true, 5-i)
	}
	r := h.one(key, l, 1)
	h.expect("unit 7", r, false, 0)
	wait := r.RetryAfter
	if wait <= time.Microsecond || wait > 2*time.Minute {
		h.t.Fatalf("unit 7: RetryAfter %v, want within (1µs, 2m]: %+v", wait, r)
	}
	// a fixed window's RetryAfter may be off by up to fixedSlack: its edges
	// are checked that far and more away
	before, after := time.Microsecond, time.Duration(0)
	if alg == core.FixedWindow {
		before, after = fixedSlack, fixedSlack
	}
	h.step(wait - before)
	if r := h.one(key, l, 1); r.Allowed {
		h.t.Fatalf("allowed %v before its RetryAfter of %v: %+v", before, wait, r)
	}
	h.step(before + after)
	if r := h.one(key, l, 1); !r.Allowed {
		h.t.Fatalf("denied at its RetryAfter of %v: %+v", wait, r)
	}
	h.step(2 * time.Minute)
	h.expect("the whole capacity after two periods", h.one(key, l, 6), true, 0)
}

// resetAfter spends a key twice, then steps the clock to the ResetAfter of
// the last result: a microsecond early the whole capacity is still denied,
// on time it is allowed.
func resetAfter(h *harness, alg core.Algorithm) {
	l := core.PerMinute(6).WithAlgorithm(alg)
	key := h.key("reset")
	h.expect("cost 2", h.one(key, l, 2), true, 4)
	h.step(10 * time.Second)
	r := h.one(key, l, 1)
	if !r.Allowed {
		h.t.Fatalf("cost 1 ten seconds later: %+v", r)
	}
	reset := r.ResetAfter
	// a fixed window's ResetAfter may be off by up to fixedSlack: its edges
	// are checked that far and more away
	before, after := time.Microsecond, time.Duration(0)
	if alg == core.FixedWindow {
		before, after = fixedSlack, fixedSlack
	}
	h.step(reset - before)
	if r := h.one(key, l, 6); r.Allowed {
		h.t.Fatalf("the whole capacity allowed %v before its ResetAfter of %v: %+v", before, reset, r)
	}
	h.step(before + after)
	h.expect(fmt.Sprintf("the whole capacity at its ResetAfter of %v", reset), h.one(key, l, 6), true, 0)
}

// recovery checks how each algorithm gives units back as time passes.
func recovery(h *harness, alg core.Algorithm) {
	switch alg {
	case core.GCRA:
		recoverGCRA(h)
	case core.FixedWindow:
		recoverFixed(h)
	case core.SlidingWindowLog:
		recoverLog(h)
	default:
		recoverCounter(h)
	}
}

// recoverGCRA: a spent bucket of 6 per minute regains one unit every 10s,
// and a fraction of an interval counts for nothing until it is whole.
func recoverGCRA(h *harness) {
	l := core.PerMinute(6)
	key := h.key("recover-gcra")
	h.expect("the whole bucket", h.one(key, l, 6), true, 0)
	h.step(25 * time.Second)
	r := h.one(key, l, 2)
	h.expect("cost 2 after 2.5 intervals", r, true, 0)
	h.wantReset("cost 2 after 2.5 intervals", r, 55*time.Second)
	r = h.one(key, l, 1)
	h.expect("one more unit", r, false, 0)
	h.wantRetry("one more unit", r, 5*time.Second)
	h.wantReset("one more unit", r, 55*time.Second)
}

// recoverFixed: a window's count starts afresh at its edge, so up to twice
// the rate passes within a few milliseconds across it.
func recoverFixed(h *harness) {
	l := core.PerMinute(6).WithAlgorithm(core.FixedWindow)
	key := h.key("recover-fixed")
	r := h.one(key, l, 1)
	h.expect("cost 1", r, true, 5)
	// ResetAfter may be off by up to fixedSlack (see near)
	h.step(r.ResetAfter - fixedSlack)
	h.expect("cost 5, shortly before the window's end", h.one(key, l, 5), true, 0)
	r = h.one(key, l, 1)
	h.expect("one more unit", r, false, 0)
	h.wantRetry("one more unit", r, fixedSlack)
	h.step(r.RetryAfter + 2*time.Millisecond)
	r = h.one(key, l, 6)
	h.expect("cost 6 at the next window's start", r, true, 0)
	h.wantReset("cost 6 at the next window's start", r, time.Minute)
}

// recoverLog: each unit leaves the log one period after it was admitted,
// and not before.
func recoverLog(h *harness) {
	l := core.PerMinute(6).WithAlgorithm(core.SlidingWindowLog)
	key := h.key("recover-log")
	h.expect("cost 2", h.one(key, l, 2), true, 4)
	h.step(20 * time.Second)
	h.expect("cost 4, 20s later", h.one(key, l, 4), true, 0)
	r := h.one(key, l, 1)
	h.expect("one more unit", r, false, 0)
	h.wantRetry("one more unit", r, 40*time.Second)
	h.wantReset("one more unit", r, time.Minute)
	h.step(40 * time.Second)
	r = h.one(key, l, 2)
	h.expect("cost 2 once the first 2 left", r, true, 0)
	h.wantReset("cost 2 once the first 2 left", r, time.Minute)
	r = h.one(key, l, 1)
	h.expect("one more unit", r, false, 0)
	h.wantRetry("one more unit", r, 20*time.Second)
}

// recoverCounter: the previous window's count weighs by how much of the
// sliding period still covers it: all of it at the window's edge, two
// thirds of it a third of the way through (Remaining rounds down), half of
// it halfway through.
func recoverCounter(h *harness) {
	l := core.PerMinute(8).WithAlgorithm(core.SlidingWindowCounter)
	key := h.key("recover-counter")
	r := h.one(key, l, 8)
	h.expect("cost 8", r, true, 0)
	h.step(r.ResetAfter - time.Minute) // to the next window's start
	r = h.one(key, l, 1)
	h.expect("a unit at the next window's start", r, false, 0)
	h.wantRetry("a unit at the next window's start", r, time.Minute/8)
	h.wantReset("a unit at the next window's start", r, time.Minute)
	h.step(20 * time.Second) // 8 × 2/3 = 5.33 weigh: 2.67 units of room
	r = h.one(key, l, 2)
	h.expect("cost 2 a third of the way through", r, true, 0)
	r = h.one(key, l, 1)
	h.expect("one more unit", r, false, 0)
	h.wantRetry("one more unit", r, 2500*time.Millisecond) // until 5.33 + 3 weigh 8
	h.step(10 * time.Second)                               // 8 × 1/2 = 4 weigh
	r = h.one(key, l, 2)
	h.expect("cost 2 halfway through", r, true, 0)
	h.wantReset("cost 2 halfway through", r, 90*time.Second)
	r = h.one(key, l, 1)
	h.expect("one more unit", r, false, 0)
	h.wantRetry("one more unit", r, time.Minute/8)
}
