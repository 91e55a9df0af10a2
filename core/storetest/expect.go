package storetest

import (
	"fmt"
	"time"

	"github.com/ratekit/ratekit/core"
)

// expect checks a result's verdict and Remaining. Under WithLeasing a
// denial's Remaining may be lower than want.
func (h *harness) expect(what string, r core.Result, allowed bool, remaining int) {
	h.t.Helper()
	if r.Allowed != allowed {
		h.t.Fatalf("%s: got %+v, want Allowed %v", what, r, allowed)
	}
	if r.Remaining == remaining || h.cfg.leasing && !allowed && r.Remaining < remaining {
		return
	}
	h.t.Fatalf("%s: got %+v, want Remaining %d", what, r, remaining)
}

// wantRetry checks RetryAfter: want exactly on a clock that stands still,
// else at most want and at least want less the time the case has run.
// Under WithLeasing a positive want only requires a positive RetryAfter.
func (h *harness) wantRetry(what string, r core.Result, want time.Duration) {
	h.t.Helper()
	if h.cfg.leasing && want > 0 {
		if r.RetryAfter <= 0 {
			h.t.Fatalf("%s: got %+v, want a positive RetryAfter", what, r)
		}
		return
	}
	h.near(what+": RetryAfter", r, r.RetryAfter, want)
}

// wantReset checks ResetAfter as wantRetry checks RetryAfter. Under
// WithLeasing only an allowed result's ResetAfter is checked, on a clock
// that stands still, and it may be longer than want.
func (h *harness) wantReset(what string, r core.Result, want time.Duration) {
	h.t.Helper()
	if h.cfg.leasing {
		ms := time.Duration(0)
		if r.Limit.Algorithm == core.FixedWindow {
			ms = fixedSlack
		}
		if r.Allowed && h.cfg.frozen() && r.ResetAfter < want-ms {
			h.t.Fatalf("%s: got %+v, want ResetAfter at least %v", what, r, want)
		}
		return
	}
	h.near(what+": ResetAfter", r, r.ResetAfter, want)
}

// near checks a duration of r: exactly want for want ≤ 0 and on a clock
// that stands still; else within the time the case has run below it.
func (h *harness) near(what string, r core.Result, got, want time.Duration) {
	h.t.Helper()
	h.nearScaled(what, r, got, want, 1)
}

// nearScaled is near for a duration that shrinks k times as fast as the
// clock runs, such as a wait rescaled to an interval k times longer.
func (h *harness) nearScaled(what string, r core.Result, got, want time.Duration, k int) {
	h.t.Helper()
	if got == want {
		return
	}
	// a fixed window ends on a whole ms, and a store may count the time
	// left in whole ms of its clock, as Redis counts a key's expiry
	var ms time.Duration
	if r.Limit.Algorithm == core.FixedWindow && want > 0 {
		ms = fixedSlack
	}
	if slack := time.Duration(k) * h.slack(); want <= 0 || got > want+ms || got < want-slack-ms {
		h.t.Fatalf("%s = %v, want %v%s (result %+v)", what, got, want, h.within(want, k), r)
	}
}

func (h *harness) within(want time.Duration, k int) string {
	if h.cfg.frozen() || want <= 0 {
		return ""
	}
	if k > 1 {
		return fmt.Sprintf(" or up to %v less, %d times the time the case has run", time.Duration(k)*h.slack(), k)
	}
	return fmt.Sprintf(" or up to %v less, the time the case has run", h.slack())
}

// passThrough returns h for assertions on calls of several checks, which a
// leasing store passes through to its shared store: they are exact.
func (h *harness) passThrough() *harness {
	c := *h.cfg
	c.leasing = false
	p := *h
	p.cfg = &c
	return &p
}

// window is a period picked for a case by [harness.quiet], and the time
// that was left in its current fixed window when it was picked.
type window struct {
	period, left time.Duration
}

const (
	// basePeriod is the first period quiet tries; every period it tries
	// is a whole number of seconds, so that a quarter of it is a whole
	// number of microseconds.
	basePeriod = time.Hour
	// quietMargin is the least time left in the current window of the
	// period quiet picks: far more than any case takes.
	quietMargin = 10 * time.Minute
)

// fixedSlack is how far a fixed window's RetryAfter and ResetAfter may lie
// from the window's end: a store may count them in whole ms of its clock,
// as Redis counts a key's expiry (and miniredis rounds a TTL down).
const fixedSlack = 3 * time.Millisecond

// quiet picks a period, about an hour, whose current window (as the fixed
// window and the sliding counter align them) has at least quietMargin left
// by the store's own clock, so that a case that uses it does not straddle
// a window's edge even on a real clock. It asks the store, spending one
// unit of a sliding-counter key of its own per period it tries: a fresh
// key's ResetAfter is the window's end plus a period, to the microsecond.
func (h *harness) quiet() window {
	h.t.Helper()
	for k := range 20 {
		p := basePeriod + time.Duration(k)*61*time.Second
		l := core.Limit{Rate: 1, Period: p, Burst: 1, Algorithm: core.SlidingWindowCounter}
		r := h.one(h.key(fmt.Sprintf("probe%d", k)), l, 1)
		if !r.Allowed {
			h.t.Fatalf("probe of a fresh key under %v denied: %+v", l, r)
		}
		left := r.ResetAfter - p
		if left <= 0 || left > p {
			h.t.Fatalf("probe of a fresh key under %v: ResetAfter %v is not the window's end plus a period", l, r.ResetAfter)
		}
		if left >= quietMargin {
			return window{period: p, left: left}
		}
	}
	h.t.Fatal("storetest: no period tried had a window with ten minutes left")
	return window{}
}

// quarterReset is the ResetAfter of a fresh key of capacity 4 per
// w.period after k units were spent in the same instant.
func (w window) quarterReset(alg core.Algorithm, k int) time.Duration {
	switch alg {
	case core.GCRA:
		return time.Duration(k) * w.period / 4 // k intervals of period/4
	case core.FixedWindow:
		return w.left // the window's end
	case core.SlidingWindowLog:
		return w.period // the newest unit leaves the log
	default:
		return w.left + w.period // the end of the window after this one
	}
}

// quarterDenied is the RetryAfter and ResetAfter of one more unit of a key
// of capacity 4 per w.period whose 4 units were spent in the same instant.
func (w window) quarterDenied(alg core.Algorithm) (retry, reset time.Duration) {
	switch alg {
	case core.GCRA:
		return w.period / 4, w.period // one interval; the whole bucket
	case core.FixedWindow:
		return w.left, w.left
	case core.SlidingWindowLog:
		return w.period, w.period
	default:
		// 4 in this window weigh 4 × (1 − f) at a fraction f of the next
		// one: a unit fits once f ≥ 1/4
		return w.left + w.period/4, w.left + w.period
	}
}
