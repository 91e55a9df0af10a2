package outbound

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeUpstream answers each request with the next of its answers (200
// when they run out), and notes when each arrived.
type fakeUpstream struct {
	mu       sync.Mutex
	answers  []func(h http.Header) int
	arrivals []time.Duration
	start    time.Time
}

func (u *fakeUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.arrivals = append(u.arrivals, time.Since(u.start))
	h := http.Header{}
	status := http.StatusOK
	if len(u.answers) > 0 {
		status = u.answers[0](h)
		u.answers = u.answers[1:]
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: r}, nil
}

func refuse(status int, retryAfter string) func(http.Header) int {
	return func(h http.Header) int {
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return status
	}
}

func get(t *testing.T, tr http.RoundTripper, timeout time.Duration) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/v1", nil)
	return tr.RoundTrip(req)
}

// TestTransportHonoursRetryAfter: a 429 with Retry-After pauses the key:
// the next request goes when it has passed, not before.
func TestTransportHonoursRetryAfter(t *testing.T) {
	mr, _ := newMini(t)
	inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
		up := &fakeUpstream{start: time.Now(), answers: []func(http.Header) int{refuse(429, "2")}}
		tr := &Transport{Limiter: mustNew(t, rdb, PerSecond(100), WithMargin(0)), Base: up}
		resp, err := get(t, tr, 10*time.Second)
		if err != nil || resp.StatusCode != 429 {
			t.Fatalf("first request: %v, %v", resp, err)
		}
		if _, err := get(t, tr, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if got := up.arrivals[1]; got < 2*time.Second || got > 2*time.Second+10*time.Millisecond {
			t.Errorf("second request arrived at %v, want at 2s", got)
		}
	})
}

// TestTransportRetries: a refused request is sent again after the pause,
// through the limiter; with no turn before the deadline, the refusal is
// the answer.
func TestTransportRetries(t *testing.T) {
	mr, _ := newMini(t)
	inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
		up := &fakeUpstream{start: time.Now(), answers: []func(http.Header) int{refuse(429, "1"), refuse(503, "3")}}
		tr := &Transport{Limiter: mustNew(t, rdb, PerSecond(100), WithMargin(0)), Base: up, Retries: 2}
		resp, err := get(t, tr, 10*time.Second)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v, %v: want 200 after two retries", resp, err)
		}
		if want := []time.Duration{0, time.Second, 4 * time.Second}; !equalish(up.arrivals, want) {
			t.Errorf("arrivals %v, want %v", up.arrivals, want)
		}
		up.answers = []func(http.Header) int{refuse(429, "5")}
		resp, err = get(t, tr, 2*time.Second)
		if err != nil || resp.StatusCode != 429 {
			t.Errorf("%v, %v: want the 429, no turn fitting the deadline", resp, err)
		}
	})
}

func equalish(got, want []time.Duration) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if (got[i] - want[i]).Abs() > 20*time.Millisecond {
			return false
		}
	}
	return true
}

// TestTransportQuotaHeaders: headers saying the quota is spent pause the
// key until the reset, unless told to ignore them.
func TestTransportQuotaHeaders(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		mr, _ := newMini(t)
		inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
			spent := func(h http.Header) int {
				h.Set("X-RateLimit-Remaining", "0")
				h.Set("X-RateLimit-Reset", "3")
				return 200
			}
			up := &fakeUpstream{start: time.Now(), answers: []func(http.Header) int{spent}}
			tr := &Transport{Limiter: mustNew(t, rdb, PerSecond(100), WithMargin(0)), Base: up, IgnoreQuotaHeaders: ignore}
			for range 2 {
				if _, err := get(t, tr, 10*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			want := 3 * time.Second
			if ignore {
				want = 10 * time.Millisecond
			}
			if got := up.arrivals[1]; got != want {
				t.Errorf("ignore %v: second request at %v, want %v", ignore, got, want)
			}
		})
	}
}

// TestTransportMinTimeLeft: a turn that would leave the request less than
// MinTimeLeft of its budget is not taken.
func TestTransportMinTimeLeft(t *testing.T) {
	mr, _ := newMini(t)
	inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
		l := mustNew(t, rdb, PerSecond(10), WithMargin(0))
		tr := &Transport{Limiter: l, Base: &fakeUpstream{start: time.Now()}}
		if _, err := l.Reserve(t.Context(), "api.test"); err != nil {
			t.Fatal(err)
		}
		// the next turn is 100ms ahead: a 120ms budget leaves 20ms, under 50ms
		if _, err := get(t, tr, 120*time.Millisecond); !errors.Is(err, ErrWouldExceedDeadline) {
			t.Errorf("err = %v, want ErrWouldExceedDeadline", err)
		}
		if _, err := get(t, tr, 200*time.Millisecond); err != nil {
			t.Errorf("200ms budget: %v", err)
		}
	})
}

// TestPauseVoidsWaiters: a pause set while callers wait moves their turns
// after it.
func TestPauseVoidsWaiters(t *testing.T) {
	mr, _ := newMini(t)
	inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
		l := mustNew(t, rdb, PerSecond(10), WithMargin(0))
		start := time.Now()
		var wg sync.WaitGroup
		woke := make([]time.Duration, 3)
		for i := range woke {
			wg.Go(func() {
				if err := l.Wait(t.Context(), "k"); err != nil {
					t.Error(err)
				}
				woke[i] = time.Since(start)
			})
			synctest.Wait()
		}
		time.Sleep(50 * time.Millisecond) // the first went at 0; two wait
		if err := l.Pause(t.Context(), "k", time.Second); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if woke[0] != 0 || woke[1] < 1050*time.Millisecond || woke[2] < 1050*time.Millisecond || woke[1] == woke[2] {
			t.Errorf("woke at %v: want the first at 0, the others after the pause, apart", woke)
		}
	})
}

// TestTransportKey: the key function's errors fail the request, wrapped.
func TestTransportKey(t *testing.T) {
	_, c := newMini(t)
	tr := &Transport{Limiter: mustNew(t, c, PerSecond(10)), Base: &fakeUpstream{},
		Key: func(r *http.Request) (string, error) { return "", errors.New("no account") }}
	if _, err := get(t, tr, time.Second); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "no account") {
		t.Errorf("err = %v, want ErrNoKey wrapping the key function's", err)
	}
}
