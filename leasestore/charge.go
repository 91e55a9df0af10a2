package leasestore

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/core"
)

// ChargeAllN implements [core.ChargeStore.ChargeAllN] through the inner
// store, which must be a ChargeStore (else an error wrapping
// [core.ErrNotSupported]). A charge always lands whole in the shared
// store, where every replica sees the debt, never in a lease here.
//
// A key the charge leaves without a unit gives up the units still leased
// here, at most [Store.Size] − 1, which it has paid for: this replica
// admits nothing from a lease while the key is in debt, and remembers the
// denial until the charge's RetryAfter, as it remembers a decision's. A
// key with room left keeps its lease, whose units count as remaining in
// the results, as they do in PeekAll's.
func (s *Store) ChargeAllN(ctx context.Context, checks []core.Check, n int) ([]core.ChargeResult, error) {
	cs, ok := s.inner.(core.ChargeStore)
	if !ok {
		return nil, fmt.Errorf("%w: the inner store %T is not a ChargeStore", core.ErrNotSupported, s.inner)
	}
	sent := s.now()
	res, err := cs.ChargeAllN(ctx, checks, n)
	if err != nil {
		return nil, err
	}
	if len(res) != len(checks) {
		return nil, fmt.Errorf("%w: %d results for %d checks", core.ErrMalformedReply, len(res), len(checks))
	}
	peeks := make([]core.Result, len(res))
	for i, c := range checks {
		s.settleCharge(c, res[i].Result, sent)
		peeks[i] = res[i].Result
	}
	if _, err := s.withLeased(checks, peeks); err != nil {
		return nil, err
	}
	for i := range res {
		res[i].Result = peeks[i]
	}
	return res, nil
}

// settleCharge brings the lease of c's key, if any, in line with r, what
// a charge sent at sent left the key: in debt, the lease's units are void
// and the denial stands until r's RetryAfter. A check that names an
// override is never leased.
func (s *Store) settleCharge(c core.Check, r core.Result, sent time.Time) {
	if r.Allowed || c.Override != "" {
		return
	}
	l, ok := s.leases.GetIfPresent(c.Key)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.under(c.Limit)
	l.units = 0
	if r.RetryAfter > 0 {
		l.deniedUntil, l.deniedCost = sent.Add(r.RetryAfter), 1
	}
}
