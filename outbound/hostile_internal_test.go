package outbound

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
)

// pauseRecorder records the pauses a Limiter reports.
type pauseRecorder struct {
	mu     sync.Mutex
	pauses []time.Duration
	why    []string
}

func (*pauseRecorder) Waited(WaitEvent)                                            {}
func (*pauseRecorder) QueueChanged(string, int)                                    {}
func (*pauseRecorder) Throttled(string, int)                                       {}
func (*pauseRecorder) RateChanged(string, float64)                                 {}
func (*pauseRecorder) RedisCalled(string, time.Duration, error)                    {}
func (*pauseRecorder) BreakerChanged(string, core.BreakerState, core.BreakerState) {}
func (r *pauseRecorder) Paused(_ string, d time.Duration, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pauses = append(r.pauses, d)
	r.why = append(r.why, reason)
}

// TestHostileHeaders reads what a hostile or broken upstream sends: huge
// and over-range numbers saturate instead of being misread, and a pause
// taken from the quota headers of a successful answer is capped lower than
// a refusal's.
func TestHostileHeaders(t *testing.T) {
	const century = 100 * 365 * 24 * time.Hour
	for _, tc := range []struct {
		name string
		h    http.Header
		ra   time.Duration // retryAfter's reading
		raOK bool
		qs   time.Duration // quotaSpent's reading
		qsOK bool
	}{
		{"Retry-After of 2^63", http.Header{"Retry-After": {"9223372036854775808"}}, century, true, 0, false},
		{"Retry-After of 2^64", http.Header{"Retry-After": {"18446744073709551616"}}, century, true, 0, false},
		{"Retry-After of 400 digits", http.Header{"Retry-After": {string(make400Digits())}}, century, true, 0, false},
		{"Retry-After of 2^63-1", http.Header{"Retry-After": {"9223372036854775807"}}, century, true, 0, false},
		{"Retry-After with a sign", http.Header{"Retry-After": {"+5"}}, 0, false, 0, false},
		{"Retry-After over-range negative", http.Header{"Retry-After": {"-99999999999999999999"}}, 0, false, 0, false},
		{"Retry-After digits then junk", http.Header{"Retry-After": {"99999999999999999999x"}}, 0, false, 0, false},
		{"RateLimit t=1e30", http.Header{"Ratelimit": {`"d";r=0;t=1e30`}}, 0, false, century, true},
		{"RateLimit t=1e400", http.Header{"Ratelimit": {`"d";r=0;t=1e400`}}, 0, false, 0, false},
		{"RateLimit r=0.0 t=5", http.Header{"Ratelimit": {`"d";r=0.0;t=5`}}, 0, false, 5 * time.Second, true},
		{"X-RateLimit-Reset 1e300", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1e300"}}, 0, false, century, true},
		{"X-RateLimit-Reset 2^63", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"9223372036854775808"}}, 0, false, century, true},
		{"X-RateLimit-Reset 2^64 after a Date", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"18446744073709551616"}, "Date": {"Sun, 01 Mar 2026 12:00:00 GMT"}}, 0, false, century, true},
		{"X-RateLimit-Reset in the past", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1000000000"}}, 0, false, 0, true},
		{"X-RateLimit-Reset an hour on", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1772370000"}}, 0, false, time.Hour, true},
		{"X-RateLimit-Reset-After 1e300", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset-After": {"1e300"}}, 0, false, century, true},
		{"RateLimit-Reset tiny", http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"1e-300"}}, 0, false, 0, true},
		{"Remaining 0e999", http.Header{"X-Ratelimit-Remaining": {"0e999"}, "X-Ratelimit-Reset": {"5"}}, 0, false, 5 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := retryAfter(tc.h, now0); got != tc.ra || ok != tc.raOK {
				t.Errorf("retryAfter = %v, %v; want %v, %v", got, ok, tc.ra, tc.raOK)
			}
			if got, ok := quotaSpent(tc.h, now0); got != tc.qs || ok != tc.qsOK {
				t.Errorf("quotaSpent = %v, %v; want %v, %v", got, ok, tc.qs, tc.qsOK)
			}
		})
	}
}

func make400Digits() []byte {
	b := make([]byte, 400)
	for i := range b {
		b[i] = '9'
	}
	return b
}

// TestTransportCapsQuotaPauses sends the Transport hostile answers: a 200
// whose quota headers name a far reset pauses the key no longer than
// MaxQuotaPause, while a 429's Retry-After pauses it up to MaxPause.
func TestTransportCapsQuotaPauses(t *testing.T) {
	ok := func(kv ...string) func(http.Header) int {
		return func(h http.Header) int {
			for i := 0; i+1 < len(kv); i += 2 {
				h.Set(kv[i], kv[i+1])
			}
			return http.StatusOK
		}
	}
	for _, tc := range []struct {
		name     string
		tr       Transport
		answer   func(http.Header) int
		want     time.Duration
		wantWhy  string
		wantNone bool
	}{
		{"RateLimit t=1e30 on a 200", Transport{}, ok("RateLimit", `"d";r=0;t=1e30`), DefaultMaxQuotaPause, PauseQuota, false},
		{"X-RateLimit far reset on a 200", Transport{}, ok("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1e300"), DefaultMaxQuotaPause, PauseQuota, false},
		{"X-RateLimit Unix time a day on", Transport{}, ok("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1772452800", "Date", "Sun, 01 Mar 2026 12:00:00 GMT"), DefaultMaxQuotaPause, PauseQuota, false},
		{"a short quota pause is kept", Transport{}, ok("RateLimit-Remaining", "0", "RateLimit-Reset", "3"), 3 * time.Second, PauseQuota, false},
		{"MaxQuotaPause set", Transport{MaxQuotaPause: 10 * time.Second}, ok("RateLimit", `"d";r=0;t=3600`), 10 * time.Second, PauseQuota, false},
		{"MaxPause below MaxQuotaPause", Transport{MaxPause: 2 * time.Second}, ok("RateLimit", `"d";r=0;t=3600`), 2 * time.Second, PauseQuota, false},
		{"429 Retry-After 2^64", Transport{}, refuse(429, "18446744073709551616"), DefaultMaxPause, PauseRetryAfter, false},
		{"503 Retry-After 2^63", Transport{}, refuse(503, "9223372036854775808"), DefaultMaxPause, PauseRetryAfter, false},
		{"429 Retry-After a day", Transport{}, refuse(429, "86400"), DefaultMaxPause, PauseRetryAfter, false},
		{"200 Retry-After 2^64", Transport{}, ok("Retry-After", "18446744073709551616"), 0, "", true},
		{"quota headers ignored", Transport{IgnoreQuotaHeaders: true}, ok("RateLimit", `"d";r=0;t=1e30`), 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr, _ := newMini(t)
			inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
				rec := &pauseRecorder{}
				up := &fakeUpstream{start: time.Now(), answers: []func(http.Header) int{tc.answer}}
				tr := tc.tr
				tr.Limiter, tr.Base = mustNew(t, rdb, PerSecond(100), WithMargin(0), WithObserver(rec)), up
				if _, err := get(t, &tr, 10*time.Second); err != nil {
					t.Fatal(err)
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if tc.wantNone {
					if len(rec.pauses) != 0 {
						t.Fatalf("paused %v (%v), want no pause", rec.pauses, rec.why)
					}
					return
				}
				if len(rec.pauses) != 1 || rec.pauses[0] != tc.want || rec.why[0] != tc.wantWhy {
					t.Fatalf("paused %v (%v), want [%v] (%s)", rec.pauses, rec.why, tc.want, tc.wantWhy)
				}
			})
		})
	}
}
