package memorystore

import (
	"context"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/localstore"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// ChargeAllN implements [core.ChargeStore.ChargeAllN], as redisstore's
// charge script spends the units, each key into its algorithm's debt
// within [core.MaxDebtPeriods], and answers as PeekAll after it.
func (s *Store) ChargeAllN(ctx context.Context, checks []core.Check, n int) ([]core.ChargeResult, error) {
	n, err := storecheck.ValidateCharge(checks, n)
	if err != nil {
		return nil, err
	}
	local := s.local(checks, nil)
	out := make([]localstore.Result, len(checks))
	charged := make([]int64, len(checks))
	s.engine.Charge(local, int64(n), core.MaxDebtPeriods, charged, out)
	results := make([]core.Result, len(checks))
	s.results(checks, local, out, results)
	cr := make([]core.ChargeResult, len(checks))
	for i := range cr {
		cr[i] = core.ChargeResult{Result: results[i], Charged: int(charged[i])}
	}
	return cr, nil
}
