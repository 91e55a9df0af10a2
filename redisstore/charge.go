package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// ChargeAllN implements [core.ChargeStore.ChargeAllN] in one script call
// (charge.lua, then peek.lua), on Redis's clock, batched with the store's
// peeks and refunds when the store batches. Each key goes into debt in its
// algorithm's own terms, within [core.MaxDebtPeriods]: a GCRA key's TAT
// moves n intervals on, a fixed window's count and a sliding counter's
// current count grow by n, a sliding log gains n members (at most twice
// its rate in all).
func (s *Store) ChargeAllN(ctx context.Context, checks []core.Check, n int) ([]core.ChargeResult, error) {
	n, err := storecheck.ValidateCharge(checks, n)
	if err != nil {
		return nil, err
	}
	reply, err := s.quotaReply(ctx, chargeScripts, checks, n, core.MaxDebtPeriods)
	if err != nil {
		return nil, err
	}
	return parseChargeReply(reply, checks, n)
}

// parseChargeReply reads a charge script's reply: the units each key took
// (0 to n), '|', then the peek that follows the charge.
func parseChargeReply(reply string, checks []core.Check, n int) ([]core.ChargeResult, error) {
	head, rest, ok := strings.Cut(reply, "|")
	if !ok {
		return nil, fmt.Errorf("%w: %q: no charge part", core.ErrMalformedReply, clip(reply))
	}
	results, err := parseQuotaReply(rest, checks)
	if err != nil {
		return nil, err
	}
	out := make([]core.ChargeResult, len(checks))
	pos := 0
	for i := range checks {
		if i > 0 {
			if pos >= len(head) || head[pos] != ' ' {
				return nil, fmt.Errorf("%w: %q: want %d charges", core.ErrMalformedReply, clip(reply), len(checks))
			}
			pos++
		}
		v, next, ok := parseInt(head, pos)
		if !ok || v < 0 || v > int64(n) {
			return nil, fmt.Errorf("%w: %q: bad charge at byte %d", core.ErrMalformedReply, clip(reply), pos)
		}
		out[i] = core.ChargeResult{Result: results[i], Charged: int(v)}
		pos = next
	}
	if pos != len(head) {
		return nil, fmt.Errorf("%w: %q: trailing bytes in the charges", core.ErrMalformedReply, clip(reply))
	}
	return out, nil
}
