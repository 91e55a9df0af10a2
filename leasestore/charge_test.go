package leasestore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/redisstore"
)

// redisCounter is a Redis store that counts the decisions it is asked.
type redisCounter struct {
	*redisstore.Store
	calls atomic.Int64
}

func (r *redisCounter) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	r.calls.Add(1)
	return r.Store.AllowAllN(ctx, checks, n)
}

// TestChargeLandsInRedis: a hot key holds a lease of units taken from
// Redis. A charge lands whole in Redis, never in the lease; while the key
// has room it keeps its lease, and decisions go on from it. A charge that
// puts the key in debt voids the lease: the next decision is denied here,
// without asking Redis, until the debt is repaid, and Redis then admits.
func TestChargeLandsInRedis(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	c, advance := testkit.FakeRedis(t, clock)
	rs, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	shared := &redisCounter{Store: rs}
	s := testkit.MustLeasing(shared, leasestore.WithSize(10), leasestore.WithClock(clock.Now))
	defer s.Close()
	ctx := context.Background()
	const key = "ratekit:tokens:{apikey:k}"
	limit := core.PerHour(100)
	check := []core.Check{{Key: key, Limit: limit}}
	inRedis := func() core.Result {
		t.Helper()
		p, err := rs.PeekAll(ctx, check)
		if err != nil {
			t.Fatal(err)
		}
		return p[0]
	}
	for range 5 { // hot: a lease of 10 units once two decisions are seen
		if r, err := testkit.AllowOne(s, ctx, key, limit, 1); err != nil || !r.Allowed {
			t.Fatalf("decision: %+v %v", r, err)
		}
	}
	before := inRedis().Remaining
	leased := 95 - before // held here, not spent yet
	if leased <= 0 {
		t.Fatalf("fixture: Redis holds %d after 5 decisions, want a lease taken", before)
	}

	res := charge(t, s, check, 30)
	if got := inRedis().Remaining; got != before-30 {
		t.Fatalf("after a charge of 30: Redis holds %d, want %d: the charge must land whole there", got, before-30)
	}
	if !res.Allowed || res.Remaining != before-30+leased {
		t.Fatalf("charge of 30: %+v, want allowed with %d remaining, the lease's %d included", res, before-30+leased, leased)
	}
	calls := shared.calls.Load()
	if r, err := testkit.AllowOne(s, ctx, key, limit, 1); err != nil || !r.Allowed || shared.calls.Load() != calls {
		t.Fatalf("a decision after the charge: %+v %v, want it spent from the lease", r, err)
	}

	res = charge(t, s, check, 200)
	if r := inRedis(); r.Allowed || res.Allowed || res.Remaining != 0 || res.RetryAfter != r.RetryAfter {
		t.Fatalf("charge of 200: %+v, Redis %+v, want a debt in both", res, r)
	}
	calls = shared.calls.Load()
	if r, err := testkit.AllowOne(s, ctx, key, limit, 1); err != nil || r.Allowed || shared.calls.Load() != calls {
		t.Fatalf("a decision in debt: %+v %v after %d calls of Redis, want a denial from here", r, err, shared.calls.Load()-calls)
	}
	advance(res.RetryAfter)
	if r, err := testkit.AllowOne(s, ctx, key, limit, 1); err != nil || !r.Allowed || shared.calls.Load() == calls {
		t.Fatalf("once the debt is repaid: %+v %v, want Redis to admit", r, err)
	}
}

// charge charges n to the one check through s.
func charge(t *testing.T, s *leasestore.Store, check []core.Check, n int) core.Result {
	t.Helper()
	res, err := s.ChargeAllN(context.Background(), check, n)
	if err != nil || len(res) != 1 || res[0].Charged != n {
		t.Fatalf("charge of %d: %+v %v", n, res, err)
	}
	return res[0].Result
}

// TestChargeNeedsAChargeStore: over a store that cannot charge, a charge
// is not supported, and a Limiter says so rather than count the store
// down: the failure policy never sees it.
func TestChargeNeedsAChargeStore(t *testing.T) {
	mem := testkit.MustMemory()
	defer mem.Close()
	s := testkit.MustLeasing(&unitCounter{Store: mem})
	defer s.Close()
	check := []core.Check{{Key: "k", Limit: core.PerHour(10)}}
	if _, err := s.ChargeAllN(context.Background(), check, 3); !errors.Is(err, core.ErrNotSupported) {
		t.Fatalf("ChargeAllN over a store without charges: %v, want ErrNotSupported", err)
	}
	l, err := core.NewLimiter(s, core.WithFailurePolicy(core.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := core.Rule{Name: "tokens", Limit: core.PerHour(10), Key: func(core.Request) (string, error) { return "apikey:k", nil }}
	_, err = l.Charge(context.Background(), r, "apikey:k", 3)
	if !errors.Is(err, core.ErrNotSupported) || errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Limiter.Charge: %v, want ErrNotSupported and no failure", err)
	}
}
