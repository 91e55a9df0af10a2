package redisstore

import (
	"fmt"
	"math"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// parseReply decodes the decide script's reply: four integers per check,
// separated by single spaces (see scripts/decide.lua), into results.
func parseReply(reply string, checks []core.Check, results []core.Result) error {
	if len(results) != len(checks) {
		return fmt.Errorf("%w: %d results for %d checks", core.ErrMalformedReply, len(results), len(checks))
	}
	var v [4]int64
	pos := 0
	for i := range checks {
		for j := range v {
			if pos > 0 {
				if pos >= len(reply) || reply[pos] != ' ' {
					return fmt.Errorf("%w: %q: want %d integers", core.ErrMalformedReply, clip(reply), 4*len(checks))
				}
				pos++
			}
			n, next, ok := parseInt(reply, pos)
			if !ok {
				return fmt.Errorf("%w: %q: bad integer at byte %d", core.ErrMalformedReply, clip(reply), pos)
			}
			v[j], pos = n, next
		}
		allowed, remaining, retry, reset := v[0], v[1], v[2], v[3]
		capacity := int64(checks[i].Limit.Capacity())
		// A denial may report less than nothing remaining: state spent
		// under a higher limit than the one now asked for. It has nothing.
		if allowed == 0 && remaining < 0 {
			remaining = 0
		}
		if allowed != 0 && allowed != 1 || remaining < 0 || remaining > capacity ||
			retry < -1 || reset < 0 || allowed == 1 && retry != 0 || retry > maxReplyUS || reset > maxReplyUS {
			return fmt.Errorf("%w: %q: values out of range for %v", core.ErrMalformedReply, clip(reply), checks[i].Limit)
		}
		results[i] = storecheck.Result(checks[i].Limit, allowed == 1, remaining, retry, reset)
	}
	if pos != len(reply) {
		return fmt.Errorf("%w: %q: trailing bytes", core.ErrMalformedReply, clip(reply))
	}
	return nil
}

// parseInt reads a base-10 integer of at most 18 digits, with an optional
// '-', from s at pos, without allocating.
func parseInt(s string, pos int) (n int64, next int, ok bool) {
	neg := pos < len(s) && s[pos] == '-'
	if neg {
		pos++
	}
	start := pos
	for pos < len(s) && s[pos] >= '0' && s[pos] <= '9' {
		if pos-start == 18 {
			return 0, pos, false
		}
		n = n*10 + int64(s[pos]-'0')
		pos++
	}
	if pos == start {
		return 0, pos, false
	}
	if neg {
		n = -n
	}
	return n, pos, true
}

// maxReplyUS bounds the waits a reply may give, in µs: about 142 years,
// far beyond any limit's period, and far from overflowing a Duration.
const maxReplyUS = 1 << 52

// clip shortens a reply for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// gcraResult decodes the one-integer reply of a GCRA one-key script (see
// scripts/gcra_single.lua) for a cost of n under limit: v >= 1 is an allowed
// call's reset-after in µs, v <= -1 a denied call's reset-after plus one,
// negated. Remaining and retry-after follow from the limit, with the
// arithmetic of gcra.lua and the memory store, and are range-checked as
// parseReply checks them.
func gcraResult(limit core.Limit, n int, v int64) (core.Result, error) {
	interval := storecheck.Interval(limit)
	tolerance := interval * int64(limit.Burst)
	allowed := v > 0
	reset, retry := v, int64(0)
	if !allowed {
		reset = -(v + 1)
	}
	if v == 0 || allowed && reset > tolerance || reset > maxReplyUS {
		// v == 0 is never sent; an allowed call cannot leave less than
		// nothing
		return core.Result{}, fmt.Errorf("%w: %d: out of range for %v", core.ErrMalformedReply, v, limit)
	}
	// A denial's reset may lie beyond the tolerance when the key was spent
	// under a higher limit than the one now asked for: nothing remains.
	remaining := max(0, int64(math.Floor(float64(tolerance-reset)/float64(interval))))
	if !allowed {
		if int64(n) > int64(limit.Burst) {
			retry = -1
		} else if retry = reset + int64(n)*interval - tolerance; retry < 1 {
			// a cost that fits is never denied
			return core.Result{}, fmt.Errorf("%w: %d: denied a fitting cost of %d under %v", core.ErrMalformedReply, v, n, limit)
		}
	}
	return storecheck.Result(limit, allowed, remaining, retry, reset), nil
}

// fixedResult decodes the one-integer reply of a fixed window's one-key
// script (see scripts/fixed_single.lua) for a cost of n under limit:
// b × period + left, where b is the units the window held before the call
// (capped at the rate) and left the ms until the window ends, 1 to period;
// positive if allowed, negated if denied. Remaining, retry-after and
// reset-after follow from the limit as fixed.lua computes them.
func fixedResult(limit core.Limit, n int, v int64) (core.Result, error) {
	pm := limit.Period.Milliseconds()
	rate := int64(limit.Rate)
	allowed := v > 0
	u := v
	if !allowed {
		u = -v
	}
	b := (u - 1) / pm
	// the window ends within the last of its left ms: the wait is counted
	// to that ms's start, and a µs, never past the end
	left := (u-b*pm-1)*1000 + 1
	if u < 1 || b > rate || allowed && b+int64(n) > rate || !allowed && int64(n) <= rate && b+int64(n) <= rate {
		// v == 0 is never sent (nor is -v past int64); an allowed call
		// cannot leave less than nothing, and a cost that fits is never
		// denied
		return core.Result{}, fmt.Errorf("%w: %d: out of range for %v at cost %d", core.ErrMalformedReply, v, limit, n)
	}
	if allowed {
		return storecheck.Result(limit, true, rate-b-int64(n), 0, left), nil
	}
	retry, reset := left, int64(0)
	if int64(n) > rate {
		retry = -1
	}
	if b > 0 {
		reset = left
	}
	return storecheck.Result(limit, false, rate-b, retry, reset), nil
}
