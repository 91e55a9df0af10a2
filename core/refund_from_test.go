package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/memorystore"
)

// slowReplyStore is a QuotaStore (a memorystore.Store on a fake clock)
// whose decisions are made at once and whose replies take reply on that
// clock to come back, as when Redis runs a script at once and the answer
// is held up on its way. It records the bounds its refunds are given.
type slowReplyStore struct {
	*memorystore.Store
	clock *testkit.Clock
	keeps bool
	reply time.Duration
	// hold, when set, holds every reply until it is closed, the call's
	// context notwithstanding, as a client that does not honour contexts
	// does: the Limiter abandons the call at its deadline
	hold chan struct{}

	mu      sync.Mutex
	refunds []time.Duration // each refunded check's ResetAfter
}

func (s *slowReplyStore) Traits() core.Traits { return core.Traits{KeepsDeadlines: s.keeps} }

func (s *slowReplyStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	res, err := s.Store.AllowAllN(ctx, checks, n)
	s.clock.Add(s.reply)
	if s.hold != nil {
		<-s.hold
	}
	return res, err
}

func (s *slowReplyStore) AllowInto(ctx context.Context, checks []core.Check, n int, results []core.Result) error {
	res, err := s.AllowAllN(ctx, checks, n)
	copy(results, res)
	return err
}

func (s *slowReplyStore) RefundAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	s.mu.Lock()
	for _, c := range checks {
		s.refunds = append(s.refunds, c.ResetAfter)
	}
	s.mu.Unlock()
	return s.Store.RefundAllN(ctx, checks, n)
}

func (s *slowReplyStore) recorded() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.refunds...)
}

// TestRefundCountsFromTheAsking: what is left of a result's ResetAfter is
// measured from when the store was asked, not from when its answer came.
// The store spends at the asking and its reply takes 300 ms: a refund
// 100 ms before the spend's ResetAfter ends tells the store 100 ms (not
// the 400 ms the reply's arrival would make it), and a refund past its end
// gives back nothing, although less than a ResetAfter has passed since the
// answer came. So a slow reply never makes a refund reach past the spend it
// names, into a later window. Both ways of calling the store.
func TestRefundCountsFromTheAsking(t *testing.T) {
	const reply = 300 * time.Millisecond
	for _, keeps := range []bool{false, true} {
		t.Run(map[bool]string{false: "goroutine", true: "keeps-deadlines"}[keeps], func(t *testing.T) {
			clock := testkit.NewClock(testkit.Start)
			mem, err := memorystore.New(memorystore.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mem.Close() })
			s := &slowReplyStore{Store: mem, clock: clock, keeps: keeps, reply: reply}
			l := newLimiter(t, s, core.WithClock(clock.Now), core.WithTimeout(time.Minute))
			r := rule("upload", core.PerSecond(1).WithAlgorithm(core.FixedWindow), "user:1")

			asked := clock.Now()
			d, err := check(t, l, r)
			if err != nil || !d.Allowed {
				t.Fatalf("first decision: %+v %v", d, err)
			}
			resetAfter := d.Results[0].ResetAfter
			if resetAfter <= reply+100*time.Millisecond {
				t.Fatalf("ResetAfter %v: the test needs more than %v", resetAfter, reply+100*time.Millisecond)
			}
			// 100 ms before the spend's ResetAfter ends, counted from the asking
			clock.Add(asked.Add(resetAfter - 100*time.Millisecond).Sub(clock.Now()))
			if err := l.Refund(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if got := s.recorded(); len(got) != 1 || got[0] != 100*time.Millisecond {
				t.Fatalf("refund 100 ms before the spend's end told the store %v, want [100ms]", got)
			}

			// a spend in the next window, refunded 100 ms after its
			// ResetAfter ended but 200 ms before that counted from the reply
			clock.Add(200 * time.Millisecond)
			asked = clock.Now()
			d, err = check(t, l, r)
			if err != nil || !d.Allowed {
				t.Fatalf("second decision: %+v %v", d, err)
			}
			clock.Add(asked.Add(d.Results[0].ResetAfter + 100*time.Millisecond).Sub(clock.Now()))
			if err := l.Refund(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if got := s.recorded(); len(got) != 1 {
				t.Fatalf("refund past the spend's end reached the store: bounds %v, want only the first refund's", got)
			}
		})
	}
}

// TestLateRefundCountsFromTheAsking: a store call that missed the
// Limiter's deadline and spent, refunded before it returned, gets its
// units back once it returns, bounded by what is left of its ResetAfter
// counted from when it was asked: its reply, 300 ms on the Limiter's
// clock, leaves the spend's ResetAfter less 300 ms.
func TestLateRefundCountsFromTheAsking(t *testing.T) {
	const reply = 300 * time.Millisecond
	clock := testkit.NewClock(testkit.Start)
	mem, err := memorystore.New(memorystore.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	hold := make(chan struct{})
	s := &slowReplyStore{Store: mem, clock: clock, reply: reply, hold: hold}
	l, err := core.NewLimiter(s, core.WithClock(clock.Now), core.WithTimeout(20*time.Millisecond), core.WithFailurePolicy(core.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	// GCRA: a fresh key's unit of one a second is back in full a second
	// after it was spent
	r := rule("upload", core.PerSecond(1), "user:1")
	const spendReset = time.Second
	d, err := check(t, l, r)
	if err != nil || !d.Allowed || !d.Results[0].Degraded {
		l.Close()
		t.Fatalf("decision past the deadline: %+v %v, want allowed by the failure policy", d, err)
	}
	if err := l.Refund(context.Background(), d); err != nil {
		l.Close()
		t.Fatal(err)
	}
	close(hold) // the late call returns, and gives back what it spent
	l.Close()   // waits for that refund
	if got := s.recorded(); len(got) != 1 || got[0] != spendReset-reply {
		t.Fatalf("late call's refund told the store %v, want [%v]: its ResetAfter %v less the reply's %v", got, spendReset-reply, spendReset, reply)
	}
}
