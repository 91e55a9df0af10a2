package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratekit/internal/redistest"
)

// redisTimeout is the tests' -redis-timeout: none of them is about a
// slow Redis, and under the race detector on a loaded machine the default
// 50 ms was missed by the embedded miniredis (a request then failed
// with "store unavailable" instead of giving up).
const redisTimeout = "10s"

// runApp runs the app with args and returns its report.
func runApp(t *testing.T, args ...string) report {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("output %q: want one JSON line (%v)", out.String(), err)
	}
	return r
}

// TestEmbedded: without -redis the app runs on an embedded miniredis and
// sends every request, spaced by the rate.
func TestEmbedded(t *testing.T) {
	var n atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1) }))
	defer up.Close()
	start := time.Now()
	r := runApp(t, "-upstream", up.URL, "-rate", "100", "-requests", "20", "-concurrency", "4", "-redis-timeout", redisTimeout)
	if r.Sent != 20 || r.OK != 20 || r.Throttled != 0 || r.Errors != 0 || r.GaveUp != 0 || n.Load() != 20 {
		t.Errorf("report %+v, upstream saw %d: want 20 sent and ok", r, n.Load())
	}
	// 20 turns 10.3 ms apart: the last one 19 intervals after the first
	if d := time.Since(start); d < 190*time.Millisecond {
		t.Errorf("20 requests at 100/s took %v: not spaced", d)
	}
}

// TestGaveUp: requests whose turn would pass their deadline give up at
// once and say so.
func TestGaveUp(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	r := runApp(t, "-upstream", up.URL, "-rate", "2", "-requests", "6", "-concurrency", "6", "-timeout", "700ms", "-redis-timeout", redisTimeout)
	if r.Sent+r.GaveUp != 6 || r.GaveUp < 3 || r.Errors != 0 {
		t.Errorf("report %+v: want most to give up at 2/s within 700ms", r)
	}
}

// TestBadFlags: a bad value exits with status 2 and names it.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{}, {"-upstream", "ftp://x"}, {"-upstream", "http://x", "-rate", "0"},
		{"-upstream", "http://x", "-concurrency", "0"}, {"-upstream", "http://x", "-timeout", "-1s"},
		{"-upstream", "http://x", "-redis-timeout", "0s"},
		{"-upstream", "http://x", "-period", "1.5ms"}, {"-upstream", "http://x", "-rate", "x"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || out.Len() != 0 || errb.Len() == 0 {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q: want 2 and a message", args, code, out.String(), errb.String())
		}
	}
}

// TestFleetPause: four apps share one redis-server; the upstream answers
// its 30th request 429 with Retry-After: 1. The first 429 pauses all four:
// at most two 429s in all, and nothing reaches the upstream within the
// second after it but those already sent.
func TestFleetPause(t *testing.T) {
	srv := redistest.StartServer(t)
	var mu sync.Mutex
	var arrivals []time.Time
	var refusedAt time.Time
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		arrivals = append(arrivals, time.Now())
		if len(arrivals) == 30 {
			refusedAt = time.Now()
		}
		if !refusedAt.IsZero() && time.Since(refusedAt) < time.Second {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer up.Close()
	var wg sync.WaitGroup
	reports := make([]report, 4)
	for i := range reports {
		wg.Go(func() {
			reports[i] = runApp(t, "-upstream", up.URL, "-redis", "redis://"+srv.Addr(), "-rate", "40", "-requests", "20", "-concurrency", "2", "-redis-timeout", redisTimeout)
		})
	}
	wg.Wait()
	var throttled int64
	for _, r := range reports {
		throttled += r.Throttled
	}
	if throttled > 2 {
		t.Errorf("%d 429s: the pause did not reach the whole fleet", throttled)
	}
	in := 0
	for _, a := range arrivals {
		if d := a.Sub(refusedAt); d > 5*time.Millisecond && d < time.Second {
			in++
		}
	}
	if in > 1 {
		t.Errorf("%d requests reached the upstream within the second of its Retry-After", in)
	}
}
