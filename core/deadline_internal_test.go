package core

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

type boundKey struct{}

// A pooled deadline carries its parent's values, ends at its deadline,
// which is never later than the call's timeout and less than a tick
// earlier, and comes back from the pool unexpired whether or not it
// expired before.
func TestBoundCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b bounds
		const timeout = 64 * time.Millisecond // a tick of 1 ms
		parent := context.WithValue(context.Background(), boundKey{}, "v")
		for round := range 3 {
			start := time.Now()
			c := b.bound(parent, start.Add(timeout), timeout)
			if got, ok := c.Deadline(); !ok || !got.Equal(start.Add(timeout)) {
				t.Fatalf("round %d: deadline %v %v, want %v: the first call of a tick sets it", round, got, ok, start.Add(timeout))
			}
			if got := c.Value(boundKey{}); got != "v" {
				t.Fatalf("round %d: value %v, want the parent's", round, got)
			}
			if err := c.Err(); err != nil {
				t.Fatalf("round %d: fresh from the pool, Err %v", round, err)
			}
			if round == 1 { // this one expires, the others are released in time
				time.Sleep(timeout)
				synctest.Wait()
				select {
				case <-c.Done():
				default:
					t.Fatalf("round %d: not done at the deadline", round)
				}
				if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("round %d: Err %v at the deadline", round, err)
				}
			}
			b.release(c)
			if round == 1 {
				// an expired context may still be in the hands of the
				// store that the caller abandoned: it is not reused
				if next := b.bound(parent, time.Now().Add(timeout), timeout); next == c {
					t.Fatalf("round %d: an expired context came back from the pool", round)
				}
			}
			time.Sleep(2 * tickOf(timeout)) // the next round starts a tick of its own
		}
	})
}

// Calls that start within a tick of one another share one deadline, and
// with it one timer; a call a tick later, or one whose timeout would end
// before the newest tick's deadline, gets a deadline of its own. No call's
// deadline is later than its start plus its timeout, or a tick earlier.
func TestBoundCtxSharesTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b bounds
		const timeout = 64 * time.Millisecond
		const tick = timeout / 64 // a call keeps at least 63/64 of its timeout
		within := func(c *boundCtx, start time.Time) {
			t.Helper()
			at, _ := c.Deadline()
			if want := start.Add(timeout); at.After(want) || !at.After(want.Add(-tick)) {
				t.Fatalf("deadline %v for a call started at %v: want in (%v, %v]", at, start, want.Add(-tick), want)
			}
		}
		start := time.Now()
		first := b.bound(context.Background(), start.Add(timeout), timeout)
		within(first, start)

		time.Sleep(tick / 2)
		second := b.bound(context.Background(), time.Now().Add(timeout), timeout)
		within(second, time.Now())
		if second.Done() != first.Done() {
			t.Fatal("two calls half a tick apart have deadlines of their own")
		}

		time.Sleep(tick / 2)
		third := b.bound(context.Background(), time.Now().Add(timeout), timeout)
		within(third, time.Now())
		if third.Done() == first.Done() {
			t.Fatal("a call a tick after the first shares its deadline")
		}

		// a call stamped before the newest tick began, whose deadline
		// comes first, does not take the later one
		early := b.bound(context.Background(), start.Add(timeout), timeout)
		within(early, start)
		if early.Done() == third.Done() {
			t.Fatal("an earlier call took a later deadline")
		}

		time.Sleep(timeout)
		synctest.Wait()
		for i, c := range []*boundCtx{first, second, third, early} {
			if !errors.Is(c.Err(), context.DeadlineExceeded) {
				t.Errorf("call %d: not done a timeout after it started", i)
			}
			b.release(c)
		}
	})
}
