package core

import (
	"errors"
	"testing"
	"time"
)

// TestBreakerConfig checks that defaults fill zero fields and that bad
// values are refused, never clamped.
func TestBreakerConfig(t *testing.T) {
	got, err := BreakerConfig{}.resolve()
	if err != nil || got != (BreakerConfig{Failures: 5, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}) {
		t.Fatalf("defaults: %+v, %v", got, err)
	}
	got, err = BreakerConfig{Backoff: 2 * time.Second}.resolve()
	if err != nil || got.MaxBackoff != 2*time.Second {
		t.Fatalf("a backoff above the default maximum: %+v, %v", got, err)
	}
	for _, bad := range []BreakerConfig{
		{Failures: -1},
		{Failures: maxBreakerFailures + 1},
		{Backoff: -time.Second},
		{MaxBackoff: -time.Second},
		{Backoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		if _, err := bad.resolve(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// breakerAt returns a breaker with the given threshold and backoffs that
// records its changes.
func breakerAt(t *testing.T, failures int, backoff, maxBackoff time.Duration) (*breaker, *[]breakerChange) {
	t.Helper()
	cfg, err := BreakerConfig{Failures: failures, Backoff: backoff, MaxBackoff: maxBackoff}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	var changes []breakerChange
	return &breaker{cfg: cfg, onChange: func(c breakerChange) { changes = append(changes, c) }}, &changes
}

// TestBreakerOpensAfterConsecutiveFailures: only an unbroken run of
// failures opens it, and only the failure that reaches the threshold
// reports the opening.
func TestBreakerOpensAfterConsecutiveFailures(t *testing.T) {
	b, changes := breakerAt(t, 3, 100*time.Millisecond, time.Second)
	boom := errors.New("boom")
	now := int64(time.Hour)
	b.failed(boom, now)
	b.failed(boom, now)
	b.succeeded() // the run is broken
	b.failed(boom, now)
	if b.failed(boom, now) || !b.closed() {
		t.Fatal("opened after two consecutive failures, want three")
	}
	if !b.failed(boom, now) {
		t.Fatal("the third consecutive failure did not open the breaker")
	}
	if b.current() != BreakerOpen {
		t.Fatalf("state %v, want open", b.current())
	}
	if b.failed(boom, now) {
		t.Fatal("a failure of an open breaker reported another opening")
	}
	if len(*changes) != 1 || (*changes)[0].from != BreakerClosed || (*changes)[0].to != BreakerOpen || (*changes)[0].cause != boom || (*changes)[0].openedAt != now {
		t.Fatalf("changes %+v, want one opening at %d caused by boom", *changes, now)
	}
	if err := b.openError(); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrBreakerOpen) || !errors.Is(err, boom) {
		t.Fatalf("open error %v, want ErrUnavailable, ErrBreakerOpen and the cause", err)
	}
}

// TestBreakerProbeCycle walks open → half-open → open → half-open →
// closed, and checks what each step reports.
func TestBreakerProbeCycle(t *testing.T) {
	b, changes := breakerAt(t, 1, 100*time.Millisecond, time.Second)
	down, still := errors.New("down"), errors.New("still down")
	b.failed(down, 0)
	if b.transition(BreakerHalfOpen, BreakerClosed, nil) {
		t.Fatal("an open breaker closed from half-open")
	}
	if !b.transition(BreakerOpen, BreakerHalfOpen, nil) {
		t.Fatal("no half-open")
	}
	if !b.transition(BreakerHalfOpen, BreakerOpen, still) {
		t.Fatal("a failed probe did not reopen")
	}
	if err := b.openError(); !errors.Is(err, still) {
		t.Fatalf("open error %v, want the failed probe's", err)
	}
	b.transition(BreakerOpen, BreakerHalfOpen, nil)
	if !b.transition(BreakerHalfOpen, BreakerClosed, nil) || !b.closed() {
		t.Fatal("a good probe did not close")
	}
	want := []BreakerState{BreakerOpen, BreakerHalfOpen, BreakerOpen, BreakerHalfOpen, BreakerClosed}
	if len(*changes) != len(want) {
		t.Fatalf("%d changes, want %d: %+v", len(*changes), len(want), *changes)
	}
	for i, c := range *changes {
		if c.to != want[i] {
			t.Errorf("change %d to %v, want %v", i, c.to, want[i])
		}
	}
	if last := (*changes)[len(want)-1]; last.probes != 1 {
		t.Errorf("closing reports %d failed probes, want 1", last.probes)
	}
	// closed again: the count of failures starts afresh
	if b.failed(down, 0) != true {
		t.Error("the breaker did not open again on a new failure")
	}
}

// TestBreakerRetryAfter: a fail-closed denial waits until the next probe,
// and at least a second.
func TestBreakerRetryAfter(t *testing.T) {
	b, _ := breakerAt(t, 1, 100*time.Millisecond, 10*time.Second)
	if got := b.retryAfter(0); got != time.Second {
		t.Fatalf("closed: %v, want 1s", got)
	}
	b.failed(errors.New("down"), 0)
	if got := b.retryAfter(0); got != time.Second {
		t.Fatalf("open, probe in 100ms: %v, want 1s", got)
	}
	b.probing(int64(time.Second), 5*time.Second)
	if got := b.retryAfter(int64(2 * time.Second)); got != 4*time.Second {
		t.Fatalf("open, probe at 6s, now 2s: %v, want 4s", got)
	}
}

// TestBreakerSchedule: waits start near Backoff, double, stay within ±50%
// of their base, and never exceed MaxBackoff.
func TestBreakerSchedule(t *testing.T) {
	b, _ := breakerAt(t, 1, 100*time.Millisecond, time.Second)
	for run := range 50 {
		bo := b.schedule()
		base := 100 * time.Millisecond
		for i := range 10 {
			w := bo.NextBackOff()
			if w > time.Second {
				t.Fatalf("run %d, wait %d: %v above the maximum", run, i, w)
			}
			lo := time.Duration(float64(min(base, time.Second*2/3)) * 0.5)
			if w < lo {
				t.Fatalf("run %d, wait %d: %v below half its base %v", run, i, w, base)
			}
			base *= 2
		}
	}
}
