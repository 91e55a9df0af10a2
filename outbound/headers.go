package outbound

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// epochFrom is the smallest X-RateLimit-Reset read as a Unix time rather
// than as seconds from now (GitHub sends the former, most others the
// latter): 2001-09-09, some 31 years of seconds.
const epochFrom = 1_000_000_000

// retryAfter reads a Retry-After header: delay seconds, or an HTTP date,
// counted from the answer's Date header when it has one (the upstream's
// clock against itself) and from now otherwise.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 64); err == nil {
		return seconds(float64(s)), true
	} else if errors.Is(err, strconv.ErrRange) && allDigits(v) {
		// all digits, too many of them: as long a delay as can be, not none
		return seconds(math.Inf(1)), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(upstreamNow(h, now)), 0), true
}

// allDigits reports whether v is only ASCII digits (ParseUint reports a
// range error before it reads them all).
func allDigits(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// upstreamNow returns the time of the answer by its Date header, or now.
func upstreamNow(h http.Header, now time.Time) time.Time {
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		return d
	}
	return now
}

// seconds converts s seconds, capped at a century, to a Duration: over
// the range it saturates, never wraps.
func seconds(s float64) time.Duration {
	const century = 100 * 365 * 24 * time.Hour
	if !(s > 0) {
		return 0
	}
	if s >= century.Seconds() {
		return century
	}
	return time.Duration(s * float64(time.Second))
}

// quotaSpent reads the RateLimit headers of an answer: how long until the
// quota is back, when a header says none is left. It understands the IETF
// draft's RateLimit field (`"name";r=0;t=30`, and the older
// `limit=100, remaining=0, reset=30`), RateLimit-Remaining with
// RateLimit-Reset, and X-RateLimit-Remaining with X-RateLimit-Reset (delta
// seconds, or a Unix time from 1e9 on) or X-RateLimit-Reset-After.
func quotaSpent(h http.Header, now time.Time) (time.Duration, bool) {
	var d time.Duration
	spent := false
	if v := h.Get("RateLimit"); v != "" {
		if w, ok := ietfSpent(v); ok {
			d, spent = max(d, w), true
		}
	}
	for _, p := range [...]string{"RateLimit-", "X-RateLimit-"} {
		if w, ok := legacySpent(h, p, now); ok {
			d, spent = max(d, w), true
		}
	}
	return d, spent
}

// ietfSpent reads a RateLimit field: a list of items whose parameters are
// r (remaining) and t (seconds to reset), or one dictionary of limit,
// remaining and reset.
func ietfSpent(v string) (time.Duration, bool) {
	var d time.Duration
	spent := false
	dict := map[string]string{}
	for item := range strings.SplitSeq(v, ",") {
		params := strings.Split(item, ";")
		p := map[string]string{}
		for _, kv := range params[1:] {
			if k, val, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
				p[strings.ToLower(k)] = strings.TrimSpace(val)
			}
		}
		if r, ok := p["r"]; ok && isZero(r) {
			if t, ok := number(p["t"]); ok {
				d, spent = max(d, seconds(t)), true
			}
		}
		if k, val, ok := strings.Cut(strings.TrimSpace(params[0]), "="); ok {
			dict[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(val)
		}
	}
	if r, ok := dict["remaining"]; ok && isZero(r) {
		if t, ok := number(dict["reset"]); ok {
			d, spent = max(d, seconds(t)), true
		}
	}
	return d, spent
}

// legacySpent reads prefix+Remaining with prefix+Reset or
// prefix+Reset-After.
func legacySpent(h http.Header, prefix string, now time.Time) (time.Duration, bool) {
	if !isZero(h.Get(prefix + "Remaining")) {
		return 0, false
	}
	if t, ok := number(h.Get(prefix + "Reset-After")); ok {
		return seconds(t), true
	}
	t, ok := number(h.Get(prefix + "Reset"))
	if !ok {
		return 0, false
	}
	if t >= epochFrom {
		// in float seconds: a Unix time past int64's range (1e300)
		// saturates at seconds' cap instead of converting to a negative
		base := upstreamNow(h, now)
		return seconds(t - float64(base.Unix()) - float64(base.Nanosecond())/1e9), true
	}
	return seconds(t), true
}

// isZero reports whether v reads as the number 0.
func isZero(v string) bool {
	f, ok := number(v)
	return ok && f == 0
}

// number reads a non-negative decimal number.
func number(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if v == "" || v[0] == '+' || v[0] == '-' {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || strings.ContainsAny(v, "xXpP_") {
		return 0, false
	}
	return f, true
}
