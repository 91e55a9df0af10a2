package redisconn

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
)

var errRefused = errors.New("connection refused")

// failing returns a ping that fails n times, then succeeds, and records
// when each attempt came (on the bubble's clock).
func failing(n int, at *[]time.Duration) func(context.Context) error {
	start := time.Now()
	return func(context.Context) error {
		*at = append(*at, time.Since(start))
		if len(*at) <= n {
			return errRefused
		}
		return nil
	}
}

// TestAwaitUpBacksOff: the waits between attempts double from the initial
// interval, with jitter, up to the maximum, and the wait ends when Redis
// answers.
func TestAwaitUpBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Duration
		var logs bytes.Buffer
		st := settings.Startup{Initial: time.Second, Max: 4 * time.Second}
		err := awaitUp(t.Context(), st, "redis:6379", failing(6, &at), slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil || len(at) != 7 {
			t.Fatalf("%v after %d attempts", err, len(at))
		}
		// bounds of each wait: [1s,1s], [1s,2s), [1s,4s), then [1s,4s)
		highs := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
		for i, hi := range highs {
			w := at[i+1] - at[i]
			if w < time.Second || w > hi {
				t.Errorf("wait %d: %v, want 1s to %v", i+1, w, hi)
			}
		}
		if n := strings.Count(logs.String(), "Redis does not answer at start"); n != 6 {
			t.Errorf("%d failed attempts logged, want 6:\n%s", n, logs.String())
		}
	})
}

// TestAwaitUpGivesUp: past the maximum elapsed time the wait ends with
// ErrNotUp, the address and the last error; with 0 it goes on.
func TestAwaitUpGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Duration
		st := settings.Startup{Initial: time.Second, Max: 2 * time.Second, MaxElapsed: 10 * time.Second}
		err := awaitUp(t.Context(), st, "redis:6379", failing(1000, &at), slog.New(slog.DiscardHandler))
		if !errors.Is(err, ErrNotUp) || !strings.Contains(err.Error(), "redis:6379") || !strings.Contains(err.Error(), "REDIS_STARTUP_MAX_ELAPSED_TIME=10s") || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("error %v", err)
		}
		if last := at[len(at)-1]; last < 10*time.Second || last > 12*time.Second {
			t.Fatalf("gave up at %v, want 10s to 12s", last)
		}
		at = nil
		st.MaxElapsed = 0
		if err := awaitUp(t.Context(), st, "redis:6379", failing(100, &at), slog.New(slog.DiscardHandler)); err != nil || len(at) != 101 {
			t.Fatalf("without a maximum: %v after %d attempts", err, len(at))
		}
	})
}

// TestAwaitUpCancelled: the wait ends when its context does.
func TestAwaitUpCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var at []time.Duration
		err := awaitUp(ctx, settings.Startup{Initial: time.Second, Max: time.Minute}, "redis:6379", failing(1000, &at), slog.New(slog.DiscardHandler))
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNotUp) {
			t.Fatalf("error %v", err)
		}
	})
}
