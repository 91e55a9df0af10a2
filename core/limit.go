package core

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidLimit is returned, wrapped with the reason, for a [Limit] whose
// rate, period or burst is out of range, and for an unknown [Algorithm].
var ErrInvalidLimit = errors.New("ratekit: invalid limit")

// ErrInvalidCost is returned, wrapped, when a request's cost n is less than 1.
var ErrInvalidCost = errors.New("ratekit: invalid cost")

// Algorithm selects how a [Limit] is enforced. The zero value is [GCRA].
type Algorithm uint8

const (
	// GCRA is the generic cell rate algorithm, a token bucket kept as one
	// timestamp: requests are spread smoothly over the period, and up to Burst
	// may arrive at once. One string key per identity. The default.
	GCRA Algorithm = iota
	// FixedWindow counts requests in consecutive windows of one period. Exact
	// within a window, but up to twice the rate can pass across a window edge.
	// Windows are aligned to the store's clock (Redis's, for a redisstore.Store):
	// window k spans [k×Period, (k+1)×Period) of Unix time, so a request at
	// an instant that is a whole multiple of Period is the first of a new
	// window. RetryAfter and ResetAfter are the time to the window's end as
	// Redis counts a key's expiry, in whole milliseconds: up to 1ms short of
	// it, never past it.
	FixedWindow
	// SlidingWindowLog keeps one sorted-set member per admitted unit over the
	// last period. Exact at every instant; memory grows with the rate.
	SlidingWindowLog
	// SlidingWindowCounter weights the previous window's count by how much of
	// it still overlaps the sliding period. Approximate, two counters per key.
	SlidingWindowCounter

	numAlgorithms = iota
)

var algorithmNames = [numAlgorithms]string{"gcra", "fixed", "sliding-log", "sliding-counter"}

// String returns the algorithm's short name: "gcra", "fixed", "sliding-log"
// or "sliding-counter".
func (a Algorithm) String() string {
	if a < numAlgorithms {
		return algorithmNames[a]
	}
	return "algorithm(" + strconv.Itoa(int(a)) + ")"
}

// ParseAlgorithm returns the algorithm named s, as printed by
// [Algorithm.String]. Matching ignores case.
func ParseAlgorithm(s string) (Algorithm, error) {
	for i, name := range algorithmNames {
		if strings.EqualFold(s, name) {
			return Algorithm(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown algorithm %q (want gcra, fixed, sliding-log or sliding-counter)", ErrInvalidLimit, s)
}

// MaxPeriod is the longest period a [Limit] may have.
const MaxPeriod = 366 * 24 * time.Hour

// MaxRate is the largest rate and burst a [Limit] may have.
const MaxRate = 1 << 30

// MaxLogRate is the largest rate of a [SlidingWindowLog] limit, whose state
// is one sorted-set member per unit: at most about 600 KB a key, and a
// trim of a whole window stays well under a millisecond of Redis time.
const MaxLogRate = 10_000

// MaxLogCost is the largest cost one call may spend under a
// [SlidingWindowLog] limit: Redis adds one member per unit, about 1.8 µs
// each (measured on redis-server 7.0, calls of 400 units took 0.7 ms), so
// that a call stays under a millisecond of Redis time. A larger cost is an
// error wrapping [ErrInvalidCost]; a cost above the limit's rate is denied
// as never allowable, as for every algorithm.
const MaxLogCost = 400

// Limit is a rate limit: Rate units per Period, enforced by Algorithm. Burst
// is the GCRA bucket's capacity: how many units may pass at once after a quiet
// spell; the window algorithms ignore it and their capacity is Rate.
//
// An unset Algorithm (the zero value) is [GCRA], which spaces units evenly
// over the period: after a burst, the next unit is due one Period/Rate
// later, not at the end of a window, so a PerMinute(5) that is spent answers
// with a RetryAfter of 12s. [FixedWindow] and the sliding windows count per
// window instead.
//
// A Limit is a plain value; build one with [PerSecond], [PerMinute],
// [PerHour] or, for any other period, [Per], or as a literal, and refine it
// with [Limit.WithBurst] and [Limit.WithAlgorithm]. Invalid limits are
// rejected by [Limit.Validate], which every constructor of a rule, store
// call and limiter runs.
type Limit struct {
	Rate      int
	Period    time.Duration
	Burst     int
	Algorithm Algorithm
}

// PerSecond returns a GCRA limit of rate per second, with a burst of rate.
func PerSecond(rate int) Limit { return Limit{Rate: rate, Period: time.Second, Burst: rate} }

// PerMinute returns a GCRA limit of rate per minute, with a burst of rate.
func PerMinute(rate int) Limit { return Limit{Rate: rate, Period: time.Minute, Burst: rate} }

// PerHour returns a GCRA limit of rate per hour, with a burst of rate.
func PerHour(rate int) Limit { return Limit{Rate: rate, Period: time.Hour, Burst: rate} }

// Per returns a GCRA limit of rate per period, with a burst of rate:
// Per(3, 10*time.Minute) is 3 per ten minutes. Per(n, time.Minute) is
// [PerMinute](n).
func Per(rate int, period time.Duration) Limit {
	return Limit{Rate: rate, Period: period, Burst: rate}
}

// WithBurst returns a copy of l with the given GCRA burst.
func (l Limit) WithBurst(burst int) Limit { l.Burst = burst; return l }

// WithAlgorithm returns a copy of l enforced by alg.
func (l Limit) WithAlgorithm(alg Algorithm) Limit { l.Algorithm = alg; return l }

// Capacity returns the most units one request may cost and still be
// allowed: Burst for GCRA, Rate for the window algorithms.
func (l Limit) Capacity() int {
	if l.Algorithm == GCRA {
		return l.Burst
	}
	return l.Rate
}

// Validate returns nil if l can be enforced, or an error wrapping
// [ErrInvalidLimit] that names the limit and says what is wrong: a rate
// below 1, a period not above zero or longer than [MaxPeriod], a burst
// below 1 (GCRA), a GCRA limit that would space units less than a
// microsecond apart (the scripts count in microseconds, and would slow it
// down), a sliding log faster than [MaxLogRate], or an unknown algorithm.
// Periods are kept to the millisecond.
func (l Limit) Validate() error {
	switch {
	case l.Algorithm >= numAlgorithms:
		return fmt.Errorf("%w: unknown algorithm %d", ErrInvalidLimit, l.Algorithm)
	case l.Rate < 1 || l.Rate > MaxRate:
		return fmt.Errorf("%w: rate %d out of range [1, %d]", ErrInvalidLimit, l.Rate, MaxRate)
	case l.Period < time.Millisecond || l.Period > MaxPeriod:
		return fmt.Errorf("%w: period %v out of range [1ms, %v]", ErrInvalidLimit, l.Period, MaxPeriod)
	case l.Period%time.Millisecond != 0:
		return fmt.Errorf("%w: period %v is not a whole number of milliseconds", ErrInvalidLimit, l.Period)
	case l.Algorithm == GCRA && (l.Burst < 1 || l.Burst > MaxRate):
		return fmt.Errorf("%w: burst %d out of range [1, %d]", ErrInvalidLimit, l.Burst, MaxRate)
	case l.Algorithm == GCRA && l.Period.Microseconds() < int64(l.Rate):
		return fmt.Errorf("%w: %v spaces units less than 1µs apart, which the scripts cannot count (at most %d per %v)", ErrInvalidLimit, l, l.Period.Microseconds(), l.Period)
	case l.Algorithm == GCRA && l.interval()*int64(l.Burst) > maxCredit:
		return fmt.Errorf("%w: burst %d holds more than %v of credit", ErrInvalidLimit, l.Burst, time.Duration(maxCredit)*time.Microsecond)
	case l.Algorithm == SlidingWindowLog && l.Rate > MaxLogRate:
		return fmt.Errorf("%w: %v keeps more than %d units in its log (use SlidingWindowCounter for higher rates)", ErrInvalidLimit, l, MaxLogRate)
	}
	return nil
}

// maxCredit bounds a GCRA bucket, burst × interval, in µs (about 17 years),
// so that every timestamp stays exact in a Lua number.
const maxCredit = 1 << 49

// interval is the GCRA spacing of units in µs: period / rate, rounded up.
func (l Limit) interval() int64 {
	us := l.Period.Microseconds()
	return (us + int64(l.Rate) - 1) / int64(l.Rate)
}

// longestReset is the longest ResetAfter an allowed Result of the limit
// can have: how long the units of one decision may go on counting.
func (l Limit) longestReset() time.Duration {
	switch l.Algorithm {
	case GCRA:
		return time.Duration(l.interval()*int64(l.Burst)) * time.Microsecond
	case SlidingWindowCounter:
		return 2 * l.Period
	}
	return l.Period
}

// String returns a readable form such as "10 per 1s (gcra, burst 20)" or
// "100 per 1m0s (fixed)".
func (l Limit) String() string {
	s := strconv.Itoa(l.Rate) + " per " + l.Period.String() + " (" + l.Algorithm.String()
	if l.Algorithm == GCRA {
		s += ", burst " + strconv.Itoa(l.Burst)
	}
	return s + ")"
}

// Result is the outcome of one limit check. Being limited is a Result with
// Allowed false, never an error.
//
// For a limit of 10 per minute (GCRA, burst 10; one unit every 6s) and a key
// that has just spent 10 units in one go, a further request gets:
//
//	Allowed:    false
//	Remaining:  0
//	RetryAfter: 6s   // one unit refills after 6s
//	ResetAfter: 1m0s // the full 10 are back after a minute
type Result struct {
	// Limit is the limit that was checked.
	Limit Limit
	// Allowed reports whether the request may proceed; its cost was
	// consumed only if it is true.
	Allowed bool
	// Remaining is how many units could still be spent right now, after
	// this request. 0 ≤ Remaining ≤ Limit.Capacity().
	Remaining int
	// RetryAfter is how long to wait before the same request could be
	// allowed: 0 when Allowed. It is -1 (see [Result.Never]) when the cost
	// exceeds the limit's capacity, so no wait will help.
	//
	// Example: 100 per minute in fixed windows, the window full and 20s
	// left in it: RetryAfter is 20s (a fixed window counts whole ms of the
	// store's clock: 19.999001s, see [FixedWindow]).
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full capacity if
	// nothing more is spent. Example: GCRA 60 per minute, burst 60, with 45
	// remaining: 15 units to refill at 1s each, so ResetAfter is 15s.
	ResetAfter time.Duration
	// Degraded reports that the decision was made without the shared store
	// (an outage), by a local fallback or a fail-open or fail-closed policy.
	Degraded bool
}

// Never reports whether the request can never be allowed, because its cost
// exceeds the limit's capacity.
func (r Result) Never() bool { return !r.Allowed && r.RetryAfter < 0 }

// maxChecks bounds how many limits one store call may decide: the rules of
// one identity and cost in one request.
const maxChecks = 64

// validateGroup checks a group of checks at cost n before a store call, as
// every store would: a cost of at least 1, at most maxChecks limits, each
// valid, and a sliding log's cost of at most [MaxLogCost].
func validateGroup(checks []Check, n int) error {
	if n < 1 {
		return fmt.Errorf("%w: %d units (want at least 1)", ErrInvalidCost, n)
	}
	if len(checks) > maxChecks {
		return fmt.Errorf("%w: %d rules of one identity in one request (at most %d)", ErrInvalidLimit, len(checks), maxChecks)
	}
	for i := range checks {
		lim := checks[i].Limit
		if err := lim.Validate(); err != nil {
			return err
		}
		if lim.Algorithm == SlidingWindowLog && n > MaxLogCost && n <= lim.Rate {
			return fmt.Errorf("%w: %d units in one call of %v (at most %d)", ErrInvalidCost, n, lim, MaxLogCost)
		}
	}
	return nil
}
