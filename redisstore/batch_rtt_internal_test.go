package redisstore

import (
	"testing"
	"time"
)

// TestRTTGauge: the gauge calls the round trip congested once its smoothed
// value passes twice the shortest of the last two windows, forgets a
// shortest round trip two windows old, and starts uncongested.
func TestRTTGauge(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var g rttGauge
	if g.congested() {
		t.Fatal("a gauge with no round trip says congested")
	}
	// a link of 500µs, pipelines alone on it
	for range 20 {
		g.observe(500*time.Microsecond, at)
		at = at.Add(time.Millisecond)
	}
	if g.congested() {
		t.Fatalf("round trips at the shortest: congested (srtt %v, min %v)", g.srtt, g.min)
	}
	// 700µs: a pipeline's own calls and some queueing, under 2x
	for range 50 {
		g.observe(700*time.Microsecond, at)
		at = at.Add(time.Millisecond)
	}
	if g.congested() {
		t.Fatalf("round trips at 1.4x the shortest: congested (srtt %v)", g.srtt)
	}
	// 3ms: queued behind a saturated server or client
	for range 50 {
		g.observe(3*time.Millisecond, at)
		at = at.Add(time.Millisecond)
	}
	if !g.congested() {
		t.Fatalf("round trips at 6x the shortest: not congested (srtt %v, min %v)", g.srtt, g.min)
	}
	// the 500µs of the first window is forgotten two windows on: what is
	// congestion is measured against the round trips of late
	at = at.Add(rttWindow + time.Millisecond)
	g.observe(3*time.Millisecond, at)
	if !g.congested() {
		t.Fatal("one window on, the first window's shortest round trip was forgotten")
	}
	at = at.Add(rttWindow + time.Millisecond)
	g.observe(3*time.Millisecond, at)
	if g.congested() {
		t.Fatalf("two windows on, still congested against %v", g.min)
	}
}

// TestMayOpen: a call opens a pipeline while a slot is free and either
// fewer than openFreely are in flight or the round trip is not congested;
// never past Parallel.
func TestMayOpen(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	congested := rttGauge{min: [2]time.Duration{100 * time.Microsecond, 0}, since: at, srtt: time.Millisecond}
	calm := rttGauge{min: [2]time.Duration{100 * time.Microsecond, 0}, since: at, srtt: 120 * time.Microsecond}
	for _, c := range []struct {
		inflight int
		rtt      rttGauge
		want     bool
	}{
		{0, congested, true},
		{openFreely - 1, congested, true},
		{openFreely, congested, false},
		{7, congested, false},
		{openFreely, calm, true},
		{7, calm, true},
		{8, calm, false},
	} {
		b := &batcher{parallel: 8, inflight: c.inflight, rtt: c.rtt}
		if got := b.mayOpen(); got != c.want {
			t.Errorf("%d in flight of 8, congested %v: mayOpen %v, want %v", c.inflight, c.rtt.congested(), got, c.want)
		}
	}
}
