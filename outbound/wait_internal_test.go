package outbound

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestWaitHandsOutDistinctTurns: callers of one key each wake once, at
// their own turn, an interval apart, in the order they asked.
func TestWaitHandsOutDistinctTurns(t *testing.T) {
	mr, _ := newMini(t)
	inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
		l := mustNew(t, rdb, PerSecond(10), WithMargin(0))
		start := time.Now()
		woke := make([]time.Duration, 5)
		var wg sync.WaitGroup
		for i := range woke {
			wg.Go(func() {
				if err := l.Wait(t.Context(), "k"); err != nil {
					t.Error(err)
				}
				woke[i] = time.Since(start)
			})
			synctest.Wait() // each asks in turn
		}
		wg.Wait()
		for i, d := range woke {
			if want := time.Duration(i) * 100 * time.Millisecond; d != want {
				t.Errorf("caller %d woke after %v, want %v", i, d, want)
			}
		}
	})
}

// TestWaitPastDeadlineFailsAtOnce: a turn that would come after the
// deadline fails without waiting, and reserves nothing: the next caller
// gets the turn it would have had.
func TestWaitPastDeadlineFailsAtOnce(t *testing.T) {
	mr, _ := newMini(t)
	inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
		l := mustNew(t, rdb, PerSecond(10), WithMargin(0))
		for range 5 { // turns at 0 .. 400ms
			if _, err := l.Reserve(t.Context(), "k"); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 450*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := l.Wait(ctx, "k") // its turn would be at 500ms
		if !errors.Is(err, ErrWouldExceedDeadline) {
			t.Fatalf("Wait = %v, want ErrWouldExceedDeadline", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Wait failed after %v, want at once", d)
		}
		r, err := l.Reserve(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := r.Delay(), 500*time.Millisecond; got != want {
			t.Errorf("next turn in %v, want %v: the failed wait reserved something", got, want)
		}
	})
}

// TestWaitNAboveBurst: n above the burst is an error at once, not a hang.
func TestWaitNAboveBurst(t *testing.T) {
	mr, c := newMini(t)
	l := mustNew(t, c, PerSecond(10).WithBurst(3))
	if err := l.WaitN(t.Context(), "k", 4); !errors.Is(err, ErrExceedsBurst) {
		t.Errorf("WaitN(4) = %v, want ErrExceedsBurst", err)
	}
	if _, err := l.ReserveN(t.Context(), "k", 4); !errors.Is(err, ErrExceedsBurst) {
		t.Errorf("ReserveN(4) = %v, want ErrExceedsBurst", err)
	}
	if _, err := l.AllowN(t.Context(), "k", 4); !errors.Is(err, ErrExceedsBurst) {
		t.Errorf("AllowN(4) = %v, want ErrExceedsBurst", err)
	}
	if err := l.WaitN(t.Context(), "k", 3); err != nil {
		t.Errorf("WaitN(3) = %v", err)
	}
	if n := len(mr.Keys()); n == 0 {
		t.Error("no key written")
	}
}

// TestWaitCanceledGivesTurnBack: a waiter whose context ends gives its
// turn back, and the next caller takes it.
func TestWaitCanceledGivesTurnBack(t *testing.T) {
	mr, _ := newMini(t)
	inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
		l := mustNew(t, rdb, PerSecond(10), WithMargin(0))
		if err := l.Wait(t.Context(), "k"); err != nil { // the turn at 0
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- l.Wait(ctx, "k") }() // the turn at 100ms
		synctest.Wait()
		time.Sleep(30 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
		start := time.Now()
		if err := l.Wait(t.Context(), "k"); err != nil {
			t.Fatal(err)
		}
		if got, want := time.Since(start), 70*time.Millisecond; got != want {
			t.Errorf("next caller waited %v, want %v (the turn given back)", got, want)
		}
	})
}

// TestClockSkewDoesNotMatter: processes whose clocks disagree by an hour
// either way share the schedule exactly, since every time comes from
// Redis's clock as a duration.
func TestClockSkewDoesNotMatter(t *testing.T) {
	mr, _ := newMini(t)
	inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
		var ls []*Limiter
		for _, skew := range []time.Duration{-time.Hour, 0, 37 * time.Minute} {
			clock := withClock(func() time.Time { return time.Now().Add(skew).Round(0) })
			ls = append(ls, mustNew(t, rdb, PerSecond(10), WithMargin(0), clock))
		}
		start := time.Now()
		var wg sync.WaitGroup
		woke := make([]time.Duration, 9)
		for i := range woke {
			wg.Go(func() {
				// (a deadline would be read by the context package on the
				// bubble's clock, not the skewed one: none here)
				if err := ls[i%len(ls)].Wait(t.Context(), "k"); err != nil {
					t.Error(err)
				}
				woke[i] = time.Since(start)
			})
			synctest.Wait()
		}
		wg.Wait()
		for i, d := range woke {
			if want := time.Duration(i) * 100 * time.Millisecond; d != want {
				t.Errorf("caller %d (clock %d) woke after %v, want %v", i, i%len(ls), d, want)
			}
		}
	})
}

// TestRedisClockNeverRunsBackwards: when Redis's clock steps back, time
// stands still for the schedule until it catches up: no turn is handed out
// twice, and none earlier than one already handed out.
func TestRedisClockNeverRunsBackwards(t *testing.T) {
	mr, _ := newMini(t)
	inBubble(t, mr, func(t *testing.T, rdb *bubbleRedis) {
		l := mustNew(t, rdb, PerSecond(10), WithMargin(0))
		var last time.Time
		for i := range 10 {
			if i == 5 {
				rdb.skew = -30 * time.Second
			}
			r, err := l.Reserve(t.Context(), "k")
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && r.TimeToAct().Sub(last) != 100*time.Millisecond {
				t.Errorf("turn %d at %v, %v after the one before, want 100ms", i, r.TimeToAct(), r.TimeToAct().Sub(last))
			}
			last = r.TimeToAct()
		}
	})
}
