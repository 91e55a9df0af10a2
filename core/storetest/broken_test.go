package storetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/storetest"
	"github.com/ratekit/ratekit/memorystore"
)

// storeFunc is a Store made of its AllowAllN.
type storeFunc func(ctx context.Context, checks []core.Check, n int) ([]core.Result, error)

func (f storeFunc) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	return f(ctx, checks, n)
}

// brokenStore is a store broken on purpose, over a memorystore.Store, and the
// case of the suite that must catch it.
type brokenStore struct {
	name, caughtBy string
	wrap           func(inner core.Store) storeFunc
	wrapQuota      func(inner core.Store) core.Store // instead of wrap, for a broken QuotaStore
}

// brokenQuota is a QuotaStore over a memorystore.Store with its peek or refund
// broken on purpose.
type brokenQuota struct {
	core.QuotaStore
	peek   func(ctx context.Context, checks []core.Check) ([]core.Result, error)
	refund func(ctx context.Context, checks []core.Check, n int) ([]core.Result, error)
}

func (b brokenQuota) PeekAll(ctx context.Context, checks []core.Check) ([]core.Result, error) {
	if b.peek != nil {
		return b.peek(ctx, checks)
	}
	return b.QuotaStore.PeekAll(ctx, checks)
}

func (b brokenQuota) RefundAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	if b.refund != nil {
		return b.refund(ctx, checks, n)
	}
	return b.QuotaStore.RefundAllN(ctx, checks, n)
}

var brokenStores = []brokenStore{
	{name: "spends-on-deny", caughtBy: "AllOrNothing", wrap: func(inner core.Store) storeFunc {
		// decides each check on its own: the checks that fit are spent
		// even when another denies
		return func(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
			out := make([]core.Result, len(checks))
			for i, c := range checks {
				res, err := inner.AllowAllN(ctx, []core.Check{c}, n)
				if err != nil {
					return nil, err
				}
				out[i] = res[0]
			}
			if slices.ContainsFunc(out, func(r core.Result) bool { return !r.Allowed }) {
				for i := range out {
					out[i].Allowed, out[i].RetryAfter = false, max(out[i].RetryAfter, 0)
				}
			}
			return out, nil
		}
	}},
	{name: "spends-above-capacity", caughtBy: "Cost", wrap: func(inner core.Store) storeFunc {
		// takes what it can of a cost above capacity before saying never
		return func(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
			for _, c := range checks {
				if n > c.Limit.Capacity() {
					_, _ = inner.AllowAllN(ctx, []core.Check{c}, c.Limit.Capacity())
				}
			}
			return inner.AllowAllN(ctx, checks, n)
		}
	}},
	{name: "reverses-results", caughtBy: "AllOrNothing", wrap: func(inner core.Store) storeFunc {
		return func(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
			res, err := inner.AllowAllN(ctx, checks, n)
			slices.Reverse(res)
			return res, err
		}
	}},
	{name: "unwraps-errors", caughtBy: "InvalidInput", wrap: func(inner core.Store) storeFunc {
		return func(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
			res, err := inner.AllowAllN(ctx, checks, n)
			if err != nil {
				return nil, errors.New(err.Error())
			}
			return res, nil
		}
	}},
	{name: "retries-a-microsecond-late", caughtBy: "BurstThenDeny", wrap: func(inner core.Store) storeFunc {
		return func(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
			res, err := inner.AllowAllN(ctx, checks, n)
			for i := range res {
				if res[i].RetryAfter > 0 {
					res[i].RetryAfter += time.Microsecond
				}
			}
			return res, err
		}
	}},
	{"peek-spends", "PeekSpendsNothing", nil, func(inner core.Store) core.Store {
		// answers a peek with a decision, which spends a unit
		q := inner.(core.QuotaStore)
		return brokenQuota{QuotaStore: q, peek: func(ctx context.Context, checks []core.Check) ([]core.Result, error) {
			res, err := q.AllowAllN(ctx, checks, 1)
			for i := range res {
				if res[i].Allowed {
					res[i].Remaining++
				}
			}
			return res, err
		}}
	}},
	{"refund-overshoots", "RefundNeverPastFull", nil, func(inner core.Store) core.Store {
		// gives back units never spent: a refund past full holds them over
		q := inner.(core.QuotaStore)
		var owed sync.Map // key → units given back beyond full
		b := brokenQuota{QuotaStore: q}
		b.refund = func(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
			res, err := q.RefundAllN(ctx, checks, n)
			for i, c := range checks {
				if err == nil && res[i].Remaining == c.Limit.Capacity() {
					owed.Store(c.Key, n)
				}
			}
			return res, err
		}
		return overshooting{brokenQuota: b, owed: &owed}
	}},
	{"refund-ignores-its-spend", "RefundToItsSpend", nil, func(inner core.Store) core.Store {
		// gives back to the key as it stands, whatever spend the refund
		// names: a window over gets its unit back in the window after
		q := inner.(core.QuotaStore)
		return brokenQuota{QuotaStore: q, refund: func(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
			blind := slices.Clone(checks)
			for i := range blind {
				blind[i].ResetAfter = 0
			}
			return q.RefundAllN(ctx, blind, n)
		}}
	}},
	{name: "ignores-overrides", caughtBy: "OverrideRaisesAndLowers", wrapQuota: func(inner core.Store) core.Store {
		return deafToOverrides{inner.(core.QuotaStore)}
	}},
}

// deafToOverrides is a broken QuotaStore that accepts overrides and
// never applies them.
type deafToOverrides struct{ core.QuotaStore }

func (deafToOverrides) SetOverride(context.Context, string, string, core.Limit, time.Duration) error {
	return nil
}

func (deafToOverrides) ClearOverride(context.Context, string, string) error { return nil }

// overshooting is a broken QuotaStore that admits the units a refund gave
// back beyond full, on top of the capacity.
type overshooting struct {
	brokenQuota
	owed *sync.Map
}

func (o overshooting) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	res, err := o.QuotaStore.AllowAllN(ctx, checks, n)
	if err != nil || len(checks) != 1 || res[0].Allowed {
		return res, err
	}
	if v, ok := o.owed.Load(checks[0].Key); ok && v.(int) >= n {
		o.owed.Store(checks[0].Key, v.(int)-n)
		res[0].Allowed, res[0].RetryAfter = true, 0
	}
	return res, err
}

const brokenEnv = "STORETEST_BROKEN_STORE"

// TestSuiteCatchesBrokenStores runs the suite on each broken store, in a
// child process (the suite fails the test it is given), and requires it
// to fail in the case that checks what the store breaks.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	for _, b := range brokenStores {
		t.Run(b.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenStore$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+b.name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite did not fail on a store that %s (err %v):\n%s", b.name, err, out)
			}
			if want := "--- FAIL: TestBrokenStore/" + b.caughtBy + " "; !strings.Contains(string(out), want) {
				t.Fatalf("the suite failed, but not in %s:\n%s", b.caughtBy, out)
			}
		})
	}
}

// TestBrokenStore runs the suite on the broken store its parent names.
func TestBrokenStore(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("runs only as the child of TestSuiteCatchesBrokenStores")
	}
	i := slices.IndexFunc(brokenStores, func(b brokenStore) bool { return b.name == name })
	if i < 0 {
		t.Fatalf("no broken store %q", name)
	}
	c := &clock{now: time.Date(2026, 3, 14, 15, 9, 26, 535_897_000, time.UTC)}
	inner := memoryStores(memorystore.WithClock(c.Now))
	b := brokenStores[i]
	storetest.Run(t, func(t *testing.T) core.Store {
		if b.wrapQuota != nil {
			return b.wrapQuota(inner(t))
		}
		return b.wrap(inner(t))
	}, storetest.WithAdvance(c.Advance))
}
