package outbound

import (
	"net/http"
	"testing"
	"time"
)

var now0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second, true},
		{http.Header{"Retry-After": {" 0 "}}, 0, true},
		{http.Header{"Retry-After": {"Sun, 01 Mar 2026 12:00:30 GMT"}}, 30 * time.Second, true},
		// an HTTP date counts from the answer's Date: the upstream's clock against itself
		{http.Header{"Retry-After": {"Sun, 01 Mar 2026 12:00:30 GMT"}, "Date": {"Sun, 01 Mar 2026 12:00:20 GMT"}}, 10 * time.Second, true},
		{http.Header{"Retry-After": {"Sun, 01 Mar 2026 11:00:00 GMT"}}, 0, true},
		{http.Header{"Retry-After": {"-1"}}, 0, false},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{"Retry-After": {"1.5"}}, 0, false},
		{http.Header{}, 0, false},
		{http.Header{"Retry-After": {"99999999999999"}}, 100 * 365 * 24 * time.Hour, true},
	} {
		got, ok := retryAfter(tc.h, now0)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%v) = %v, %v; want %v, %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}

func TestQuotaSpent(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{"Ratelimit": {`"default";r=0;t=30`}}, 30 * time.Second, true},
		{http.Header{"Ratelimit": {`"default";r=5;t=30`}}, 0, false},
		{http.Header{"Ratelimit": {`"a";r=3;t=1, "b";r=0;t=45`}}, 45 * time.Second, true},
		{http.Header{"Ratelimit": {`limit=100, remaining=0, reset=12`}}, 12 * time.Second, true},
		{http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"7"}}, 7 * time.Second, true},
		{http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"20"}}, 20 * time.Second, true},
		// GitHub: a Unix time, counted from the answer's Date
		{http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1772366460"}, "Date": {"Sun, 01 Mar 2026 12:00:00 GMT"}}, time.Minute, true},
		{http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset-After": {"1.5"}}, 1500 * time.Millisecond, true},
		{http.Header{"X-Ratelimit-Remaining": {"1"}, "X-Ratelimit-Reset": {"20"}}, 0, false},
		{http.Header{"X-Ratelimit-Remaining": {"0"}}, 0, false},
		{http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"-5"}}, 0, false},
		{http.Header{"X-Ratelimit-Remaining": {"0x0"}, "X-Ratelimit-Reset": {"5"}}, 0, false},
		{http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"NaN"}}, 0, false},
	} {
		got, ok := quotaSpent(tc.h, now0)
		if got != tc.want || ok != tc.ok {
			t.Errorf("quotaSpent(%v) = %v, %v; want %v, %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzSignals: no header makes the parsers panic or name a negative pause.
func FuzzSignals(f *testing.F) {
	for _, s := range []string{"3", "Sun, 01 Mar 2026 12:00:30 GMT", `"default";r=0;t=30`, "limit=1, remaining=0, reset=9", "1772366460", "1e308", "0;r=0;t=1e400", "18446744073709551616", "1e300", `"d";r=0;t=1e30`} {
		f.Add(s, s, "0")
	}
	f.Fuzz(func(t *testing.T, ra, rl, rem string) {
		h := http.Header{"Retry-After": {ra}, "Ratelimit": {rl}, "X-Ratelimit-Remaining": {rem},
			"X-Ratelimit-Reset": {ra}, "Ratelimit-Remaining": {rem}, "Ratelimit-Reset-After": {rl}, "Date": {ra}}
		if d, _ := retryAfter(h, now0); d < 0 {
			t.Fatalf("retryAfter = %v", d)
		}
		if d, _ := quotaSpent(h, now0); d < 0 {
			t.Fatalf("quotaSpent = %v", d)
		}
	})
}
