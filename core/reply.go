package core

import (
	"errors"
	"fmt"
)

// ErrMalformedReply is returned, wrapped, when a store's script answers
// with something other than the reply it documents.
var ErrMalformedReply = errors.New("ratekit: malformed script reply")

// parseReply decodes the decide script's reply: four integers per check,
// separated by single spaces (see scripts/decide.lua), into results.
func parseReply(reply string, checks []Check, results []Result) error {
	if len(results) != len(checks) {
		return fmt.Errorf("%w: %d results for %d checks", ErrMalformedReply, len(results), len(checks))
	}
	var v [4]int64
	pos := 0
	for i := range checks {
		for j := range v {
			if pos > 0 {
				if pos >= len(reply) || reply[pos] != ' ' {
					return fmt.Errorf("%w: %q: want %d integers", ErrMalformedReply, clip(reply), 4*len(checks))
				}
				pos++
			}
			n, next, ok := parseInt(reply, pos)
			if !ok {
				return fmt.Errorf("%w: %q: bad integer at byte %d", ErrMalformedReply, clip(reply), pos)
			}
			v[j], pos = n, next
		}
		allowed, remaining, retry, reset := v[0], v[1], v[2], v[3]
		capacity := int64(checks[i].Limit.Capacity())
		if allowed != 0 && allowed != 1 || remaining < 0 || remaining > capacity ||
			retry < -1 || reset < 0 || allowed == 1 && retry != 0 {
			return fmt.Errorf("%w: %q: values out of range for %v", ErrMalformedReply, clip(reply), checks[i].Limit)
		}
		results[i] = result(checks[i].Limit, allowed == 1, remaining, retry, reset)
	}
	if pos != len(reply) {
		return fmt.Errorf("%w: %q: trailing bytes", ErrMalformedReply, clip(reply))
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

// clip shortens a reply for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
