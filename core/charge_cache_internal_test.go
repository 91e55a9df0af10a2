package core

import (
	"context"
	"testing"
	"time"
)

// TestChargeFeedsTheDeniedCache: a charge that leaves a key in debt is
// remembered by the denied-key cache, so the key's next decisions are
// denied without asking the store, with the store's wait, until the debt
// is repaid and no longer: at the charge's RetryAfter the store is asked
// again, and it admits once a unit fits. Every answer of the cache is
// checked against the store at the same instant. Both ways of charging
// feed it: Charge and ChargeDecision.
func TestChargeFeedsTheDeniedCache(t *testing.T) {
	for _, alg := range []Algorithm{GCRA, FixedWindow, SlidingWindowLog, SlidingWindowCounter} {
		for _, way := range []string{"Charge", "ChargeDecision"} {
			t.Run(alg.String()+"/"+way, func(t *testing.T) {
				clock, raw, advance := clockedRedis(t)
				l, err := NewLimiter(raw, WithTimeout(time.Minute)) // no loaded machine's miss
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				l.now = func() int64 { return int64(clock.Now().Sub(clockStart)) }
				l.clock = clock.Now
				id := "apikey:k"
				r := identityRule("tokens", PerMinute(100).WithAlgorithm(alg), &id)
				checks := []Check{{Key: mustKey(t, l, r.Name, id), Limit: r.Limit}}
				debt := chargeIntoDebt(t, l, r, id, way)

				// right after the charge, and right before its wait ends
				for _, step := range []time.Duration{0, debt.RetryAfter - time.Millisecond} {
					advance(step)
					got := decideCached(t, l, checks, true)
					if step == 0 && got.RetryAfter != debt.RetryAfter {
						t.Fatalf("the cache's wait %v, the charge's %v", got.RetryAfter, debt.RetryAfter)
					}
					peek, err := raw.(QuotaStore).PeekAll(context.Background(), checks)
					if err != nil || peek[0].Allowed {
						t.Fatalf("the cache denied what the store allows: %+v %v", peek, err)
					}
				}
				advance(time.Millisecond)
				got := decideCached(t, l, checks, false)
				// a fixed window's waits are whole ms of the server's clock,
				// which miniredis rounds down: up to 2ms short of the
				// window's end, which the store then answers
				for i := 0; i < 2 && !got.Allowed && alg == FixedWindow && got.RetryAfter <= time.Millisecond; i++ {
					advance(time.Millisecond)
					got = decideCached(t, l, checks, false)
				}
				if !got.Allowed {
					t.Fatalf("once the debt is repaid: %+v, want allowed", got)
				}
			})
		}
	}
}

// chargeIntoDebt admits a request of r and charges it 150 units, a 100
// unit budget's and a half, by way, and returns what the charge left.
func chargeIntoDebt(t *testing.T, l *Limiter, r Rule, id, way string) ChargeResult {
	t.Helper()
	ctx := context.Background()
	d, err := l.Check(ctx, emptyRequest{}, []Rule{r})
	if err != nil || !d.Allowed {
		t.Fatalf("first request: %+v %v", d, err)
	}
	var res ChargeResult
	if way == "Charge" {
		res, err = l.Charge(ctx, r, id, 150)
	} else {
		var all []ChargeResult
		if all, err = l.ChargeDecision(ctx, d, 150); len(all) == 1 {
			res = all[0]
		}
	}
	if err != nil || res.Allowed || res.RetryAfter <= 0 || res.Degraded {
		t.Fatalf("%s of 150: %+v %v, want a debt", way, res, err)
	}
	return res
}

// decideCached decides checks at a cost of one and fails the test unless
// the denied-key cache answered as cached says.
func decideCached(t *testing.T, l *Limiter, checks []Check, cached bool) Result {
	t.Helper()
	res := make([]Result, len(checks))
	hit, err := l.decideGroup(context.Background(), checks, 1, res)
	if err != nil {
		t.Fatal(err)
	}
	if hit != cached {
		t.Fatalf("decision %+v: answered by the cache %v, want %v", res[0], hit, cached)
	}
	if cached && res[0].Allowed {
		t.Fatalf("the cache allowed: %+v", res[0])
	}
	return res[0]
}
