package inflight

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newManual returns a Limiter over a miniredis at t0 whose renewal rounds
// run when the test sends on the returned channel, and have ended when
// the send on done returns.
func newManual(t *testing.T, opts ...Option) (*Limiter, *miniredis.Miniredis, func()) {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.SetTime(t0)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	tick := make(chan time.Time)
	done := make(chan struct{})
	opts = append([]Option{WithTimeout(time.Second), func(l *Limiter) error {
		l.newTicker = func(time.Duration) (<-chan time.Time, func()) { return tick, func() {} }
		l.afterRenew = func() { done <- struct{}{} }
		return nil
	}}, opts...)
	l, err := New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, mr, func() { tick <- time.Now(); <-done }
}

// A renewed lease outlives its first lease time; one not renewed does not.
func TestRenewalKeepsSlot(t *testing.T) {
	for _, renew := range []bool{true, false} {
		l, mr, round := newManual(t, WithLease(10*time.Second))
		held, _, err := l.Acquire(context.Background(), "k", 1)
		if err != nil || held == nil {
			t.Fatalf("Acquire: %v, %v", held, err)
		}
		mr.SetTime(t0.Add(8 * time.Second))
		if renew {
			round()
			if got, want := mr.TTL("k"), 10*time.Second; got != want {
				t.Errorf("TTL after renewal %v, want %v", got, want)
			}
		}
		mr.SetTime(t0.Add(15 * time.Second))
		_, res, err := l.Acquire(context.Background(), "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := res.Allowed, !renew; got != want {
			t.Errorf("renewed %v: at 15s another acquisition allowed %v, want %v", renew, got, want)
		}
	}
}

// A lease that ran out before its renewal is lost, and renewed no more; a
// released one is not renewed.
func TestRenewalLost(t *testing.T) {
	l, mr, round := newManual(t, WithLease(10*time.Second))
	lost, _, _ := l.Acquire(context.Background(), "k", 2)
	kept, _, _ := l.Acquire(context.Background(), "k", 2)
	gone, _, _ := l.Acquire(context.Background(), "j", 1)
	if err := gone.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	mr.SetTime(t0.Add(5 * time.Second))
	round()
	// both renewed to 15s; lost's lease is cut to 10s, as if a renewal
	// had failed, and a holder of a process that died long ago remains
	mr.SetTime(t0.Add(10 * time.Second))
	if _, err := mr.ZAdd("k", float64(t0.Add(10*time.Second).UnixMilli()), lost.holder); err != nil {
		t.Fatal(err)
	}
	if _, err := mr.ZAdd("k", 0, "dead"); err != nil {
		t.Fatal(err)
	}
	round()
	if !lost.Lost() || kept.Lost() || gone.Lost() {
		t.Fatalf("lost %v, kept %v, released %v; want true, false, false", lost.Lost(), kept.Lost(), gone.Lost())
	}
	members, _ := mr.ZMembers("k")
	if len(members) != 1 || members[0] != kept.holder {
		t.Fatalf("holders %q, want only the kept one", members)
	}
	l.mu.Lock()
	_, tracked := l.live[lost]
	n := len(l.live)
	l.mu.Unlock()
	if tracked || n != 1 {
		t.Fatalf("renewing %d leases (lost one among them: %v), want 1", n, tracked)
	}
	if err := lost.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A call abandoned at its deadline that succeeds after all hands its reply
// to late, on the goroutine that made it.
func TestDoLate(t *testing.T) {
	l, _, _ := newManual(t)
	l.keeps = false
	unblock := make(chan struct{})
	got := make(chan any, 1)
	_, err := l.do(context.Background(), time.Millisecond, func(context.Context) (any, error) {
		<-unblock
		return []any{int64(1), int64(1)}, nil
	}, func(reply any) { got <- reply })
	if err == nil {
		t.Fatal("no error at the deadline")
	}
	close(unblock)
	select {
	case r := <-got:
		if a, _, err := parseAcquire(r); err != nil || !a {
			t.Fatalf("late reply %v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("late never called")
	}
}

// An acquisition abandoned at its deadline whose slot Redis granted after
// all gives the slot back.
func TestReleaseLate(t *testing.T) {
	l, mr, _ := newManual(t)
	if _, err := mr.ZAdd("k", float64(t0.Add(time.Minute).UnixMilli()), "h"); err != nil {
		t.Fatal(err)
	}
	l.releaseLate(context.Background(), "k", "h", []any{int64(1), int64(1)})
	if m, _ := mr.ZMembers("k"); len(m) != 0 {
		t.Fatalf("holders %q after the late release", m)
	}
}
