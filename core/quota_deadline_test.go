package core_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratekit/ratekit/core"
)

// stallQuotaStore allows every check at once and states that it keeps
// deadlines, so that a Limiter calls it on the caller's goroutine; every
// quota call stalls until its context ends, as a call to a stopped Redis
// through a client with ContextTimeoutEnabled does, and records the
// deadline it was given.
type stallQuotaStore struct {
	instantStore
	deadlines chan time.Time
}

func (s stallQuotaStore) stall(ctx context.Context) error {
	d, _ := ctx.Deadline() // the zero time when there is none
	s.deadlines <- d
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Hour): // the bubble's time: a call without a deadline ends here at once
		return errStalled
	}
}

// errStalled ends a stalled quota call given no deadline.
var errStalled = errors.New("stall quota store: no deadline came")

func (s stallQuotaStore) PeekAll(ctx context.Context, _ []core.Check) ([]core.Result, error) {
	return nil, s.stall(ctx)
}

func (s stallQuotaStore) RefundAllN(ctx context.Context, _ []core.Check, _ int) ([]core.Result, error) {
	return nil, s.stall(ctx)
}

func (s stallQuotaStore) Reset(ctx context.Context, _ ...string) error { return s.stall(ctx) }

func (s stallQuotaStore) SetOverride(ctx context.Context, _, _ string, _ core.Limit, _ time.Duration) error {
	return s.stall(ctx)
}

func (s stallQuotaStore) ClearOverride(ctx context.Context, _, _ string) error { return s.stall(ctx) }

func (stallQuotaStore) WatchResets(func(string)) (func(), error) { return func() {}, nil }

// TestQuotaCallsKeepTheDeadline stalls every quota call of a store that
// keeps deadlines: Peek, Refund, Reset, SetOverride and ClearOverride each
// give the store a deadline at most the Limiter's timeout away, and return
// by it with the context's error. Time is a synctest bubble's.
func TestQuotaCallsKeepTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 40 * time.Millisecond
		store := stallQuotaStore{deadlines: make(chan time.Time, 1)}
		l, err := core.NewLimiter(store, core.WithTimeout(timeout))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		r := rule("a", core.PerMinute(10), "user:1")
		r.Overrides = true
		ctx := context.Background()
		d, err := l.Check(ctx, staticRequest{ctx}, []core.Rule{r})
		if err != nil || !d.Allowed {
			t.Fatalf("Check: %+v, %v; want allowed", d, err)
		}
		for _, c := range []struct {
			name string
			call func() error
		}{
			// first, while what the decision spent still counts
			{"Refund", func() error { return l.Refund(ctx, d) }},
			{"Peek", func() error { _, err := l.Peek(ctx, r, "user:1"); return err }},
			{"Reset", func() error { return l.Reset(ctx, "a", "user:1") }},
			{"SetOverride", func() error { return l.SetOverride(ctx, r, "user:1", core.PerMinute(20), 0) }},
			{"ClearOverride", func() error { return l.ClearOverride(ctx, "a", "user:1") }},
		} {
			start := time.Now()
			err := c.call()
			took := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s on a stalled store: %v; want context.DeadlineExceeded", c.name, err)
			}
			select {
			case dl := <-store.deadlines:
				if dl.IsZero() {
					t.Errorf("%s gave the store no deadline", c.name)
				} else if dl.Sub(start) > timeout {
					t.Errorf("%s gave the store the deadline %v after the call, want one within %v", c.name, dl.Sub(start), timeout)
				}
			default:
				t.Errorf("%s did not call the store", c.name)
			}
			if took > timeout {
				t.Errorf("%s returned %v after the call, past the %v deadline", c.name, took, timeout)
			}
		}
	})
}
