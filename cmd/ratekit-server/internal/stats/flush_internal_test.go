package stats

import (
	"slices"
	"testing"
	"time"
)

// TestFlusherDeltas: the flusher sends what each counter gained since the
// last flush, remembered in the rule itself: once a key is dropped, the
// flusher holds nothing of it.
func TestFlusherDeltas(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := NewWithClock(func() time.Time { return now })
	f := &Flusher{s: s}
	s.Key(Values, "d.k_a").TotalHits.Add(3)
	s.TotalRequests.Inc()
	if got, want := f.lines(), []string{"ratelimit.service.rate_limit.d.k_a.total_hits:3|c\n", "ratelimit_server.ShouldRateLimit.total_requests:1|c\n"}; !slices.Equal(got, want) {
		t.Fatalf("first flush %q; want %q", got, want)
	}
	if got := f.lines(); len(got) != 0 {
		t.Fatalf("nothing moved, yet %q", got)
	}
	s.Key(Values, "d.k_a").TotalHits.Add(2)
	if got, want := f.lines(), []string{"ratelimit.service.rate_limit.d.k_a.total_hits:2|c\n"}; !slices.Equal(got, want) {
		t.Fatalf("second flush %q; want %q", got, want)
	}
	now = now.Add(IdleAfter)
	s.mu.Lock()
	s.sweep(now.Unix())
	s.mu.Unlock()
	if keys, _ := s.Held(Values); keys != 0 {
		t.Fatalf("%d keys after the sweep", keys)
	}
	s.Key(Values, "d.k_a").TotalHits.Add(1)
	if got, want := f.lines(), []string{"ratelimit.service.rate_limit.d.k_a.total_hits:1|c\n"}; !slices.Equal(got, want) {
		t.Fatalf("after the key came back %q; want %q", got, want)
	}
}
