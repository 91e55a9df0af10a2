package outbound

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidLimit is returned, wrapped with the reason, for a [Limit] that
// cannot be enforced.
var ErrInvalidLimit = errors.New("ratekit: outbound: invalid limit")

// MaxRate is the largest rate and burst of a [Limit].
const MaxRate = 1 << 30

// MaxPeriod is the longest period of a [Limit].
const MaxPeriod = 366 * 24 * time.Hour

// Limit is what the upstream allows: Rate units per Period, with at most
// Burst of them at once.
//
// Burst is 1 unless set: units are then spread evenly, Period/Rate apart,
// which keeps any window of one Period at or under Rate however the
// upstream counts (a sliding log, a sliding or fixed window, a token
// bucket). A Burst of b lets b units go at once after a quiet spell, as a
// token bucket of that size does; only an upstream that allows bursts
// itself (a token bucket of at least b) takes them without refusing some.
type Limit struct {
	Rate   int
	Period time.Duration
	Burst  int
}

// PerSecond returns a Limit of rate units per second, one at a time.
func PerSecond(rate int) Limit { return Limit{Rate: rate, Period: time.Second} }

// PerMinute returns a Limit of rate units per minute, one at a time.
func PerMinute(rate int) Limit { return Limit{Rate: rate, Period: time.Minute} }

// PerHour returns a Limit of rate units per hour, one at a time.
func PerHour(rate int) Limit { return Limit{Rate: rate, Period: time.Hour} }

// WithBurst returns a copy of l that lets burst units go at once.
func (l Limit) WithBurst(burst int) Limit {
	l.Burst = burst
	return l
}

// burst returns the Limit's burst, 1 when unset.
func (l Limit) burst() int {
	if l.Burst == 0 {
		return 1
	}
	return l.Burst
}

// Validate returns nil if l can be enforced, or an error wrapping
// [ErrInvalidLimit] that says what is wrong: a rate below 1 or above
// [MaxRate], a period under a millisecond, longer than [MaxPeriod] or not
// in whole milliseconds, a negative burst or one above [MaxRate], or units
// less than a microsecond apart.
func (l Limit) Validate() error {
	switch {
	case l.Rate < 1 || l.Rate > MaxRate:
		return fmt.Errorf("%w: rate %d (want 1 to %d)", ErrInvalidLimit, l.Rate, MaxRate)
	case l.Period < time.Millisecond || l.Period > MaxPeriod:
		return fmt.Errorf("%w: period %v (want 1ms to %v)", ErrInvalidLimit, l.Period, MaxPeriod)
	case l.Period%time.Millisecond != 0:
		return fmt.Errorf("%w: period %v is not a whole number of milliseconds", ErrInvalidLimit, l.Period)
	case l.Burst < 0 || l.Burst > MaxRate:
		return fmt.Errorf("%w: burst %d (want 0 for 1, or up to %d)", ErrInvalidLimit, l.Burst, MaxRate)
	case l.Period/time.Microsecond < time.Duration(l.Rate):
		return fmt.Errorf("%w: %d per %v puts units less than a microsecond apart", ErrInvalidLimit, l.Rate, l.Period)
	}
	return nil
}

// String returns a readable form such as "50 per 1s" or "5000 per 1h0m0s
// (burst 100)".
func (l Limit) String() string {
	if l.burst() == 1 {
		return fmt.Sprintf("%d per %v", l.Rate, l.Period)
	}
	return fmt.Sprintf("%d per %v (burst %d)", l.Rate, l.Period, l.burst())
}
