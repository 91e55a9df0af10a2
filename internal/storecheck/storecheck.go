// Package storecheck holds what ratekit's stores share about the calls of
// the store contract ([core.Store], [core.QuotaStore]): the validation of
// their arguments, the Results they build, and the rules of overrides, so
// that every store refuses and answers alike.
package storecheck

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storekey"
)

// MaxChecks bounds how many limits one call may decide.
const MaxChecks = 64

// Validate checks the arguments every store's AllowAllN takes, before any
// work: a cost of at least 1, 1 to [MaxChecks] checks, keys that are not
// empty, override keys in their key's hash tag, valid limits and, for a
// sliding log, a cost of at most [core.MaxLogCost].
func Validate(checks []core.Check, n int) error {
	if n < 1 {
		return fmt.Errorf("%w: %d units (want at least 1)", core.ErrInvalidCost, n)
	}
	if len(checks) == 0 || len(checks) > MaxChecks {
		return fmt.Errorf("%w: %d checks in one call (want 1 to %d)", core.ErrInvalidLimit, len(checks), MaxChecks)
	}
	for i := range checks {
		if checks[i].Key == "" {
			return fmt.Errorf("%w: empty storage key", core.ErrInvalidIdentity)
		}
		if o := checks[i].Override; o != "" {
			if err := ValidateOverrideKey(checks[i].Key, o); err != nil {
				return err
			}
		}
		lim := checks[i].Limit
		if err := lim.Validate(); err != nil {
			return err
		}
		if lim.Algorithm == core.SlidingWindowLog && n > core.MaxLogCost && n <= lim.Rate {
			return fmt.Errorf("%w: %d units in one call of %v (at most %d)", core.ErrInvalidCost, n, lim, core.MaxLogCost)
		}
	}
	return nil
}

// ValidateKeys checks the keys of a Reset: none may be empty.
func ValidateKeys(keys []string) error {
	for _, k := range keys {
		if k == "" {
			return fmt.Errorf("%w: empty storage key", core.ErrInvalidIdentity)
		}
	}
	return nil
}

// Result builds a Result from the four integers a decision yields, with
// durations in microseconds: a retry below zero is [core.Result.Never]'s
// -1. Remaining below zero, which a key spent under a higher limit than
// limit reports, is zero.
func Result(limit core.Limit, allowed bool, remaining, retryUS, resetUS int64) core.Result {
	remaining = max(remaining, 0)
	retry := time.Duration(retryUS) * time.Microsecond
	if retryUS < 0 {
		retry = -1
	}
	return core.Result{
		Limit:      limit,
		Allowed:    allowed,
		Remaining:  int(remaining),
		RetryAfter: retry,
		ResetAfter: time.Duration(resetUS) * time.Microsecond,
	}
}

// Interval is the GCRA spacing of limit's units in µs: period / rate,
// rounded up.
func Interval(limit core.Limit) int64 {
	us := limit.Period.Microseconds()
	return (us + int64(limit.Rate) - 1) / int64(limit.Rate)
}

// ValidateOverrideKey checks that override can name the override of key:
// not key itself, and in key's Redis Cluster hash slot.
func ValidateOverrideKey(key, override string) error {
	if override == key || storekey.HashTag(override) != storekey.HashTag(key) {
		return fmt.Errorf("%w: override key %q for storage key %q (want another key of its hash tag)", core.ErrInvalidIdentity, override, key)
	}
	return nil
}

// ValidateOverrideKeys checks the keys of a ClearOverride: neither empty,
// and override a key of key's hash tag.
func ValidateOverrideKeys(key, override string) error {
	if key == "" || override == "" {
		return fmt.Errorf("%w: empty storage or override key", core.ErrInvalidIdentity)
	}
	return ValidateOverrideKey(key, override)
}

// ValidateOverride checks the arguments of a SetOverride.
func ValidateOverride(key, override string, limit core.Limit, ttl time.Duration) error {
	if err := ValidateOverrideKeys(key, override); err != nil {
		return err
	}
	if ttl < 0 {
		return fmt.Errorf("%w: override ttl %v (want 0 for none, or more)", core.ErrInvalidLimit, ttl)
	}
	return limit.Validate()
}

// OverrideTTL is an override's time to live in whole milliseconds, rounded
// up; 0 for none.
func OverrideTTL(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// Applied returns the limit of c under an override of rate, period and
// burst o: c's algorithm with o's parameters, and whether that limit can be
// enforced. One that cannot (a sliding log faster than [core.MaxLogRate])
// is no override, as the scripts read it.
func Applied(c *core.Check, o core.Limit) (core.Limit, bool) {
	l := core.Limit{Rate: o.Rate, Period: o.Period, Burst: o.Burst, Algorithm: c.Limit.Algorithm}
	return l, l.Validate() == nil
}

// HasOverride reports whether any check names an override key.
func HasOverride(checks []core.Check) bool {
	for i := range checks {
		if checks[i].Override != "" {
			return true
		}
	}
	return false
}

// RefundBound returns a refund check's [core.Check].ResetAfter in whole µs,
// rounded up (it bounds from above how long the units go on counting): 0
// for no bound, -1 for a bound already past, when nothing goes back.
func RefundBound(c *core.Check) int64 {
	switch d := c.ResetAfter; {
	case d < 0:
		return -1
	case d == 0:
		return 0
	default:
		return int64((d + time.Microsecond - 1) / time.Microsecond)
	}
}

// RefundBounds returns the checks' [RefundBound]s, space-separated, as
// refund.lua reads them, or "" when no check sets one.
func RefundBounds(checks []core.Check) string {
	var b []byte
	for i := range checks {
		if checks[i].ResetAfter != 0 {
			b = make([]byte, 0, 8*len(checks))
			break
		}
	}
	if b == nil {
		return ""
	}
	for i := range checks {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, RefundBound(&checks[i]), 10)
	}
	return string(b)
}

// ValidateCharge checks the arguments of a ChargeAllN, as Validate does
// AllowAllN's but for a sliding log's cost, which a charge may pass, and
// returns n clamped to [core.MaxCharge]: no key can take more.
func ValidateCharge(checks []core.Check, n int) (int, error) {
	if n < 1 {
		return 0, fmt.Errorf("%w: a charge of %d units (want at least 1)", core.ErrInvalidCost, n)
	}
	n = min(n, core.MaxCharge)
	if err := Validate(checks, min(n, core.MaxLogCost)); err != nil {
		return 0, err
	}
	return n, nil
}
