package inflight

import (
	"context"
	"errors"
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

// A call abandoned at its deadline that ends after all hands its reply
// or error to late, on the goroutine that made it, and do reports it
// abandoned.
func TestDoLate(t *testing.T) {
	l, _, _ := newManual(t)
	l.keeps = false
	for _, fail := range []bool{false, true} {
		unblock := make(chan struct{})
		type outcome struct {
			reply any
			err   error
		}
		got := make(chan outcome, 1)
		_, err, abandoned := l.do(context.Background(), time.Millisecond, func(context.Context) (any, error) {
			<-unblock
			if fail {
				return nil, errors.New("connection reset")
			}
			return []any{int64(1), int64(1)}, nil
		}, func(reply any, err error) { got <- outcome{reply, err} })
		if err == nil || !abandoned {
			t.Fatalf("at the deadline: error %v, abandoned %v", err, abandoned)
		}
		close(unblock)
		select {
		case o := <-got:
			if a, _, err := parseAcquire(o.reply); fail != (o.err != nil) || !fail && (err != nil || !a) {
				t.Fatalf("late got %v, %v", o.reply, o.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("late never called")
		}
	}
}

// An acquisition abandoned at its deadline whose slot Redis granted after
// all gives the slot back when its reply comes; one that failed in a way
// that may have let it run gives it back as an orphan, at once and at the
// renewal rounds until Redis removes it or its lease would have run out.
func TestSettleLate(t *testing.T) {
	l, mr, round := newManual(t, WithLease(10*time.Second))
	ctx := context.Background()
	future := float64(t0.Add(time.Minute).UnixMilli())
	if _, err := mr.ZAdd("k", future, "h"); err != nil {
		t.Fatal(err)
	}
	l.settleLate(ctx, "k", "h", []any{int64(1), int64(1)}, nil)
	if m, _ := mr.ZMembers("k"); len(m) != 0 {
		t.Fatalf("holders %q after the late release", m)
	}

	// the release reaches Redis before the acquisition: the holder is
	// taken afterwards, and the next round gives it back
	l.settleLate(ctx, "j", "late", nil, errors.New("i/o timeout"))
	waitOrphans(t, l, 1)
	if _, err := mr.ZAdd("j", future, "late"); err != nil {
		t.Fatal(err)
	}
	round()
	if m, _ := mr.ZMembers("j"); len(m) != 0 {
		t.Fatalf("holders %q after a renewal round", m)
	}
	waitOrphans(t, l, 0)

	// an error reply of Redis: the script did not run
	l.settleLate(ctx, "j", "refused", nil, replyError("WRONGTYPE Operation against a key holding the wrong kind of value"))
	waitOrphans(t, l, 0)

	// an orphan whose lease would have run out is forgotten
	l.settleLate(ctx, "i", "gone", nil, errors.New("i/o timeout"))
	waitOrphans(t, l, 1)
	l.mu.Lock()
	for o := range l.orphans {
		l.orphans[o] = time.Now().Add(-time.Second)
	}
	l.mu.Unlock()
	round()
	waitOrphans(t, l, 0)
}

// waitOrphans waits until l takes charge of n orphans: their first
// release runs on a goroutine of its own.
func waitOrphans(t *testing.T, l *Limiter, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		got := len(l.orphans)
		l.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d orphans, want %d", got, n)
		}
	}
}

// replyError is an error reply of Redis, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")
