package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/memorystore"
)

// lateStore is a QuotaStore (a memorystore.Store) whose decisions miss the
// Limiter's deadline: on the goroutine path, a call decides and answers
// late, ignoring its context, as go-redis without ContextTimeoutEnabled
// does; on the direct path (keeps), a call decides and then waits for its
// context to end, so the caller never learns that it spent, as go-redis
// with ContextTimeoutEnabled cuts a call whose reply comes late. A lost
// call decides nothing (the command never reached Redis); an unsent call
// decides nothing either, and says so at its deadline with
// [core.ErrNotSent], as a batching redisstore.Store says of a call still
// queued; a loading store answers at once with an error reply of Redis's.
type lateStore struct {
	*memorystore.Store
	keeps   bool
	late    time.Duration // how late a goroutine-path call answers
	lost    atomic.Bool
	unsent  atomic.Bool
	loading atomic.Bool
}

func (s *lateStore) Traits() core.Traits { return core.Traits{KeepsDeadlines: s.keeps} }

func (s *lateStore) AllowInto(ctx context.Context, checks []core.Check, n int, results []core.Result) error {
	res, err := s.AllowAllN(ctx, checks, n)
	copy(results, res)
	return err
}

func (s *lateStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	if s.loading.Load() {
		return nil, loadingError{}
	}
	if s.unsent.Load() {
		<-ctx.Done()
		return nil, fmt.Errorf("%w: %w", core.ErrNotSent, ctx.Err())
	}
	var (
		res []core.Result
		err error
	)
	if !s.lost.Load() {
		res, err = s.Store.AllowAllN(context.Background(), checks, n)
	}
	if s.keeps {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	time.Sleep(s.late)
	if s.lost.Load() {
		return nil, context.DeadlineExceeded
	}
	return res, err
}

// loadingError is an error reply of Redis's about the server, as go-redis
// types them: the script did not run.
type loadingError struct{}

func (loadingError) Error() string { return "LOADING Redis is loading the dataset in memory" }
func (loadingError) RedisError()   {}

// TestRefundOfLateDecisions: decisions whose store call missed the
// deadline (20 ms) were decided by the fallback; Refund gives back to the
// store too, what the late call spent (the goroutine path tells) or may
// have spent (the direct path cannot tell), and nothing when the store
// said it spent nothing (an error reply, or a call it never sent). Close
// waits for those refunds, which run in the background.
func TestRefundOfLateDecisions(t *testing.T) {
	for _, c := range []lateCase{
		{name: "goroutine path, refunded before the late reply", remaining: 3},
		{name: "goroutine path, refunded after the late reply", waitLate: true, remaining: 3},
		{name: "goroutine path, the late reply a denial", before: 3, remaining: 0},
		{name: "goroutine path, under FailOpen", policy: core.FailOpen, remaining: 3},
		{name: "direct path, cut at the deadline", keeps: true, remaining: 3},
		{name: "direct path, the store full", keeps: true, before: 3, remaining: 1}, // the bound: the cost too many
		{name: "direct path, the command lost", keeps: true, before: 2, lost: true, remaining: 2},
		{name: "direct path, the command lost, nothing spent before", keeps: true, lost: true, remaining: 3}, // never past capacity
		{name: "goroutine path, the late call failing", before: 2, lost: true, remaining: 2},
		{name: "an error reply", loading: true, before: 2, remaining: 1},
		{name: "direct path, the call never sent", keeps: true, before: 2, unsent: true, remaining: 1},
		{name: "goroutine path, the call never sent", before: 2, unsent: true, remaining: 1},
		{name: "direct path, the call never sent, under FailOpen", keeps: true, policy: core.FailOpen, before: 2, unsent: true, remaining: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			for attempt := 0; ; attempt++ {
				if attempt == 5 {
					t.Fatal("five late calls answered within the deadline: the machine is too slow to tell")
				}
				if refundLate(t, c) {
					return
				}
			}
		})
	}
}

// lateCase is one case of TestRefundOfLateDecisions.
type lateCase struct {
	name      string
	keeps     bool
	policy    core.FailurePolicy
	before    int  // units the key spent in the store before
	lost      bool // the call never reaches the store
	unsent    bool // the store never sends the call, and says so
	loading   bool // the store answers an error reply at once
	waitLate  bool // Refund only once the late call has returned
	remaining int  // what the store holds once the Limiter is closed
}

// refundLate runs one case of TestRefundOfLateDecisions, and reports
// whether the call was late: a caller that wakes past the late answer
// takes it as in time.
func refundLate(t *testing.T, c lateCase) bool {
	t.Helper()
	limit := core.PerMinute(3)
	mem := testkit.MustMemory()
	defer mem.Close()
	store := &lateStore{Store: mem, keeps: c.keeps, late: 200 * time.Millisecond}
	store.lost.Store(c.lost)
	store.unsent.Store(c.unsent)
	store.loading.Store(c.loading)
	var (
		mu       sync.Mutex
		reported []error
	)
	l, err := core.NewLimiter(store, core.WithTimeout(20*time.Millisecond), core.WithFailurePolicy(c.policy),
		core.OnError(func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	id := "user:late"
	key, err := l.StorageKey("login", id)
	if err != nil {
		t.Fatal(err)
	}
	if c.before > 0 {
		if res, err := mem.AllowAllN(context.Background(), []core.Check{{Key: key, Limit: limit}}, c.before); err != nil || !res[0].Allowed {
			t.Fatalf("fixture: %+v %v", res, err)
		}
	}
	d, err := check(t, l, rule("login", limit, id))
	if err != nil || !d.Allowed {
		t.Fatalf("a late decision: %+v %v, want an allowance", d, err)
	}
	if !d.Degraded() {
		return false
	}
	if c.unsent && c.keeps {
		// the decision's error, as OnError and the logger see it, says
		// that the call never went out (on the goroutine path the Limiter
		// stops waiting at the deadline, and learns it only once the call
		// returns, which its refund reads)
		mu.Lock()
		if len(reported) == 0 || !errors.Is(reported[0], core.ErrNotSent) || !errors.Is(reported[0], context.DeadlineExceeded) {
			t.Errorf("reported %v; want an error wrapping core.ErrNotSent and context.DeadlineExceeded", reported)
		}
		mu.Unlock()
	}
	if c.waitLate {
		time.Sleep(2 * store.late)
	}
	if err := l.Refund(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	l.Close() // waits for the late call and the refunds in the store
	res, err := mem.PeekAll(context.Background(), []core.Check{{Key: key, Limit: limit}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Remaining != c.remaining {
		t.Errorf("the store holds %d of 3 once the refund is done, want %d", res[0].Remaining, c.remaining)
	}
	return true
}
