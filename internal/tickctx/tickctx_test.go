package tickctx

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

type valueKey struct{}

// A pooled deadline carries its parent's values, ends at its deadline,
// which is never later than the call's timeout and less than a tick
// earlier, and comes back from the pool unexpired whether or not it
// expired before.
func TestPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Pool
		const timeout = 64 * time.Millisecond // a tick of 1 ms
		parent := context.WithValue(context.Background(), valueKey{}, "v")
		for round := range 3 {
			start := time.Now()
			c := b.Get(parent, start.Add(timeout), timeout)
			if got, ok := c.Deadline(); !ok || !got.Equal(start.Add(timeout)) {
				t.Fatalf("round %d: deadline %v %v, want %v: the first call of a tick sets it", round, got, ok, start.Add(timeout))
			}
			if got := c.Value(valueKey{}); got != "v" {
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
			b.Put(c)
			if round == 1 {
				// an expired context may still be in the hands of the
				// store that the caller abandoned: it is not reused
				if next := b.Get(parent, time.Now().Add(timeout), timeout); next == c {
					t.Fatalf("round %d: an expired context came back from the pool", round)
				}
			}
			time.Sleep(2 * Of(timeout)) // the next round starts a tick of its own
		}
	})
}

// Calls that start within a tick of one another share one deadline, and
// with it one timer; a call a tick later, or one whose timeout would end
// before the newest tick's deadline, gets a deadline of its own. No call's
// deadline is later than its start plus its timeout, or a tick earlier.
func TestPoolSharesTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Pool
		const timeout = 64 * time.Millisecond
		const tick = timeout / 64 // a call keeps at least 63/64 of its timeout
		within := func(c *Ctx, start time.Time) {
			t.Helper()
			at, _ := c.Deadline()
			if want := start.Add(timeout); at.After(want) || !at.After(want.Add(-tick)) {
				t.Fatalf("deadline %v for a call started at %v: want in (%v, %v]", at, start, want.Add(-tick), want)
			}
		}
		start := time.Now()
		first := b.Get(context.Background(), start.Add(timeout), timeout)
		within(first, start)

		time.Sleep(tick / 2)
		second := b.Get(context.Background(), time.Now().Add(timeout), timeout)
		within(second, time.Now())
		if second.Done() != first.Done() {
			t.Fatal("two calls half a tick apart have deadlines of their own")
		}

		time.Sleep(tick / 2)
		third := b.Get(context.Background(), time.Now().Add(timeout), timeout)
		within(third, time.Now())
		if third.Done() == first.Done() {
			t.Fatal("a call a tick after the first shares its deadline")
		}

		// a call stamped before the newest tick began, whose deadline
		// comes first, does not take the later one
		early := b.Get(context.Background(), start.Add(timeout), timeout)
		within(early, start)
		if early.Done() == third.Done() {
			t.Fatal("an earlier call took a later deadline")
		}

		time.Sleep(timeout)
		synctest.Wait()
		for i, c := range []*Ctx{first, second, third, early} {
			if !errors.Is(c.Err(), context.DeadlineExceeded) {
				t.Errorf("call %d: not done a timeout after it started", i)
			}
			b.Put(c)
		}
	})
}

// lateTimer is a context whose deadline has passed while its timer has not
// ended it yet, as go-redis can see one: Err is still nil.
type lateTimer struct {
	context.Context
	at time.Time
}

func (c lateTimer) Deadline() (time.Time, bool) { return c.at, true }

// Expired tells a context that ended, or whose deadline passed before its
// timer fired, from one still live.
func TestExpired(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	now := time.Now()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"no deadline", context.Background(), nil},
		{"canceled", canceled, context.Canceled},
		{"deadline passed, timer not fired", lateTimer{context.Background(), now.Add(-time.Millisecond)}, context.DeadlineExceeded},
		{"deadline now", lateTimer{context.Background(), now}, context.DeadlineExceeded},
		{"deadline ahead", lateTimer{context.Background(), now.Add(time.Hour)}, nil},
	} {
		if got := Expired(tc.ctx); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s: Expired %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Within gives a call its parent when the parent's deadline comes first,
// else a pooled context whose deadline is the call's; putting back nil is
// a no-op.
func TestWithin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p Pool
		const timeout = 64 * time.Millisecond
		short, cancel := context.WithTimeout(context.Background(), timeout/2)
		defer cancel()
		if ctx, c := p.Within(short, timeout); ctx != short || c != nil {
			t.Fatalf("a parent whose deadline comes first: got %v, %v; want the parent itself", ctx, c)
		}
		p.Put(nil)
		start := time.Now()
		ctx, c := p.Within(context.Background(), timeout)
		if c == nil || ctx != context.Context(c) {
			t.Fatalf("a parent without a deadline: got %v, %v; want a pooled context", ctx, c)
		}
		if at, ok := ctx.Deadline(); !ok || !at.Equal(start.Add(timeout)) {
			t.Fatalf("deadline %v %v, want %v", at, ok, start.Add(timeout))
		}
		p.Put(c)
	})
}

// Ended tells a context's ending, wrapped or not, from any other error.
func TestEnded(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.Canceled, true},
		{fmt.Errorf("ratekit: %w", context.DeadlineExceeded), true},
		{errors.New("ratekit: store unavailable"), false},
		{nil, false},
	} {
		if got := Ended(tc.err); got != tc.want {
			t.Errorf("Ended(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
