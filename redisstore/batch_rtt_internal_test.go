package redisstore

import (
	"context"
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
// fewer than openFreely are in flight or the round trip is not congested
// (here with no load, so that any queue is worth a pipeline); never past
// Parallel.
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

// queued returns a batcher's queue of n calls.
func queued(n int) []*batchCall {
	q := make([]*batchCall, n)
	for i := range q {
		q[i] = &batchCall{state: callQueued}
	}
	return q
}

// TestExtraPipelineWorthIt: beyond the first openFreely pipelines, a call
// opens one, and a returning one passes its slot on, only for a queue of at
// least 1/extraShare of the load; within them, for any queue. A slot not
// passed on is freed, and the calls stay queued for the pipelines still in
// flight, whose hand-off then takes them whatever their number.
func TestExtraPipelineWorthIt(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	calm := rttGauge{min: [2]time.Duration{100 * time.Microsecond, 0}, since: at, srtt: 120 * time.Microsecond}
	// 96 calls in flight or queued: a further pipeline needs 24
	const load = 96 * loadSmoothing
	for _, c := range []struct {
		inflight, queued int
		open, handOff    bool
	}{
		{openFreely - 1, 1, true, true},
		{openFreely, 1, false, true},
		{openFreely + 1, 23, false, false},
		{openFreely + 1, 24, true, true},
		{7, 30, true, true},
		{8, 30, false, true},
	} {
		b := &batcher{parallel: 8, maxBatch: 128, inflight: c.inflight, rtt: calm, load: load, pending: queued(c.queued)}
		if got := b.mayOpen(); got != c.open {
			t.Errorf("%d in flight, %d queued of a load of 96: mayOpen %v, want %v", c.inflight, c.queued, got, c.open)
		}
		// handOff is asked by a pipeline that has returned, still counted
		// in flight
		b.inflight = max(c.inflight, 1)
		got := b.handOff()
		if (got != nil) != c.handOff {
			t.Errorf("%d in flight, %d queued of a load of 96: handOff passed the slot on %v, want %v", b.inflight, c.queued, got != nil, c.handOff)
		}
		if got != nil && (len(got) != c.queued || len(b.pending) != 0 || b.sending != c.queued) {
			t.Errorf("handOff took %d of %d queued, left %d, %d sending", len(got), c.queued, len(b.pending), b.sending)
		}
		if got == nil && len(b.pending) != c.queued {
			t.Errorf("a slot not passed on took calls: %d of %d left queued", len(b.pending), c.queued)
		}
	}
	b := &batcher{parallel: 8, maxBatch: 128, inflight: 3, closed: true, pending: queued(40)}
	if b.handOff() != nil {
		t.Error("a closed batcher passed a slot on")
	}
}

// TestLoad: each call that queues moves the load a 1/loadSmoothing of the
// way to the calls then in flight or queued, so that it follows a crowd
// within a few dozen calls, and a lone burst moves it little.
func TestLoad(t *testing.T) {
	// every slot taken, 200 calls in flight: calls queue
	b := &batcher{parallel: 2, maxBatch: 128, inflight: 2, sending: 200}
	for range 100 {
		b.mu.Lock()
		b.enqueue(context.Background(), &batchCall{})
		b.pending = b.pending[:0] // taken at once, as a busy batcher would
	}
	if got := b.load / loadSmoothing; got < 190 || got > 201 {
		t.Fatalf("load %d after 100 calls queued with 200 in flight, want about 200", got)
	}
	b.sending = 10
	for range 5 {
		b.mu.Lock()
		b.enqueue(context.Background(), &batchCall{})
		b.pending = b.pending[:0]
	}
	if got := b.load / loadSmoothing; got < 120 {
		t.Fatalf("load %d after 5 calls queued with 10 in flight, from about 200: want it moved little", got)
	}
	for range 100 {
		b.mu.Lock()
		b.enqueue(context.Background(), &batchCall{})
		b.pending = b.pending[:0]
	}
	if got := b.load / loadSmoothing; got > 15 {
		t.Fatalf("load %d after 105 calls queued with 10 in flight, want about 11", got)
	}
}
