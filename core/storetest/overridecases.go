package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/core"
)

// overrideCases are the cases of [core.QuotaStore]'s methods, run only
// on a store that implements it.
var overrideCases = []testCase{
	{"OverrideRaisesAndLowers", true, false, overrideRaisesAndLowers},
	{"OverrideCleared", true, false, overrideCleared},
	{"OverrideExpires", true, true, overrideExpires},
	{"OverrideInvalid", false, false, overrideInvalid},
}

// overrides returns the store under test as a QuotaStore, or skips
// the case.
func (h *harness) overrides() core.QuotaStore {
	h.t.Helper()
	o, ok := h.store.(core.QuotaStore)
	if !ok {
		h.t.Skipf("storetest: %T is not a core.QuotaStore", h.store)
	}
	return o
}

// overrideKey is the override key of key, as a Limiter names it.
func overrideKey(key string) string { return key + ":override" }

// setOverride sets the override of key to l for ttl.
func (h *harness) setOverride(key string, l core.Limit, ttl time.Duration) {
	h.t.Helper()
	if err := h.overrides().SetOverride(h.t.Context(), key, overrideKey(key), l, ttl); err != nil {
		h.t.Fatalf("SetOverride(%q, %v, %v): %v", key, l, ttl, err)
	}
}

// over decides n units of key under rule, whose override key the check
// names, and checks the result as every result is checked, for the limit
// want: the override's, or rule when none applies.
func (h *harness) over(key string, rule, want core.Limit, n int) core.Result {
	h.t.Helper()
	checks := []core.Check{{Key: key, Limit: rule, Override: overrideKey(key)}}
	res, err := h.store.AllowAllN(h.t.Context(), checks, n)
	if err != nil {
		h.t.Fatalf("AllowAllN(%q %v with override, %d): %v", key, rule, n, err)
	}
	if err := shape([]core.Check{{Key: key, Limit: want}}, n, res); err != nil {
		h.t.Fatalf("AllowAllN(%q %v with override, %d), want limit %v: %v", key, rule, n, want, err)
	}
	return res[0]
}

// expectPeek peeks at key under rule with its override key, as over
// decides, and expects the result for the limit want, when the store is a
// QuotaStore.
func (h *harness) expectPeek(what, key string, rule, want core.Limit, allowed bool, remaining int) {
	h.t.Helper()
	q, ok := h.store.(core.QuotaStore)
	if !ok {
		return
	}
	res, err := q.PeekAll(h.t.Context(), []core.Check{{Key: key, Limit: rule, Override: overrideKey(key)}})
	if err == nil {
		err = peekShape(want, res)
	}
	if err != nil {
		h.t.Fatalf("%s: PeekAll(%q %v with override), want limit %v: %v", what, key, rule, want, err)
	}
	h.expect(what, res[0], allowed, remaining)
}

// overrideRaisesAndLowers overrides a limit of 4 per period with 8 for one
// identity and 2 for another: each gets its own, to a decision (a cost of
// 6, above the rule's capacity, included) and to a peek; a third identity,
// and a check that names no override key, keep 4. An override the
// algorithm cannot enforce (a sliding log above MaxLogRate) is none.
func overrideRaisesAndLowers(h *harness, alg core.Algorithm) {
	h.overrides()
	w := h.quiet()
	rule := core.Limit{Rate: 4, Period: w.period, Burst: 4, Algorithm: alg}
	high := core.Limit{Rate: 8, Period: w.period, Burst: 8, Algorithm: alg}
	low := core.Limit{Rate: 2, Period: w.period, Burst: 2, Algorithm: alg}
	raised, lowered, plain := h.key("override"), h.otherKey("override"), h.otherKey("override")
	h.setOverride(raised, high.WithAlgorithm(core.GCRA), 0) // the algorithm stays the rule's
	h.setOverride(lowered, low, 0)
	h.expectPeek("a fresh key's peek under 8", raised, rule, high, true, 8)
	h.expect("6 units under 8", h.over(raised, rule, high, 6), true, 2)
	h.expect("2 units more under 8", h.over(raised, rule, high, 2), true, 0)
	h.expect("a unit more under 8", h.over(raised, rule, high, 1), false, 0)
	h.expect("a unit under 2", h.over(lowered, rule, low, 1), true, 1)
	h.expect("a unit more under 2", h.over(lowered, rule, low, 1), true, 0)
	h.expect("a third unit under 2", h.over(lowered, rule, low, 1), false, 0)
	h.expect("another identity under 4", h.over(plain, rule, rule, 4), true, 0)
	h.expect("a unit more under 4", h.over(plain, rule, rule, 1), false, 0)
	other := h.otherKey("override")
	h.setOverride(other, high, 0)
	h.expect("a check without its override key", h.one(other, rule, 4), true, 0)
	if alg == core.SlidingWindowLog {
		fast := core.Limit{Rate: core.MaxLogRate + 1, Period: w.period, Burst: 1}
		key := h.otherKey("override")
		h.setOverride(key, fast, 0)
		h.expect("an override too fast for a log", h.over(key, rule, rule, 4), true, 0)
	}
}

// overrideCleared spends 6 of an override of 8, clears it, and finds the
// rule's limit of 4 again, counting what was spent.
func overrideCleared(h *harness, alg core.Algorithm) {
	o := h.overrides()
	w := h.quiet()
	rule := core.Limit{Rate: 4, Period: w.period, Burst: 4, Algorithm: alg}
	high := core.Limit{Rate: 8, Period: w.period, Burst: 8, Algorithm: alg}
	key := h.key("override-cleared")
	h.setOverride(key, high, 0)
	h.expect("6 units under 8", h.over(key, rule, high, 6), true, 2)
	if err := o.ClearOverride(h.t.Context(), key, overrideKey(key)); err != nil {
		h.t.Fatalf("ClearOverride(%q): %v", key, err)
	}
	h.expect("a unit under 4 after 6 spent", h.over(key, rule, rule, 1), false, 0)
	h.expectPeek("peek under 4", key, rule, rule, false, 0)
	if err := o.ClearOverride(h.t.Context(), key, overrideKey(key)); err != nil {
		h.t.Fatalf("ClearOverride of no override: %v", err)
	}
	fresh := h.otherKey("override-cleared")
	h.setOverride(fresh, high, 0)
	if err := o.ClearOverride(h.t.Context(), fresh, overrideKey(fresh)); err != nil {
		h.t.Fatalf("ClearOverride(%q): %v", fresh, err)
	}
	h.expect("4 units after the override went", h.over(fresh, rule, rule, 4), true, 0)
}

// overrideExpires sets an override of 8 for 10 s: it applies a
// millisecond before, and the rule's 4 at the expiry, counting the unit
// spent under the override.
func overrideExpires(h *harness, alg core.Algorithm) {
	h.overrides()
	w := h.quiet()
	rule := core.Limit{Rate: 4, Period: w.period, Burst: 4, Algorithm: alg}
	high := core.Limit{Rate: 8, Period: w.period, Burst: 8, Algorithm: alg}
	key := h.key("override-expires")
	h.setOverride(key, high, 10*time.Second)
	h.step(10*time.Second - time.Millisecond)
	h.expectPeek("peek a ms before expiry", key, rule, high, true, 8)
	h.expect("a unit a ms before expiry", h.over(key, rule, high, 1), true, 7)
	h.step(time.Millisecond)
	h.expectPeek("peek at expiry", key, rule, rule, true, 3)
	h.expect("3 units at expiry", h.over(key, rule, rule, 3), true, 0)
}

// overrideInvalid: invalid limits, negative TTLs, empty keys, override
// keys equal to their storage key or in another hash tag are errors, in
// SetOverride, ClearOverride and AllowAllN alike, and change nothing.
func overrideInvalid(h *harness, _ core.Algorithm) {
	o := h.overrides()
	ctx := h.t.Context()
	key := h.key("override-invalid")
	good := core.PerHour(8)
	for _, c := range []struct {
		what          string
		key, override string
		limit         core.Limit
		ttl           time.Duration
		want          error
	}{
		{"a zero rate", key, overrideKey(key), core.Limit{Period: time.Hour, Burst: 1}, 0, core.ErrInvalidLimit},
		{"a negative ttl", key, overrideKey(key), good, -time.Second, core.ErrInvalidLimit},
		{"an empty key", "", overrideKey(key), good, 0, core.ErrInvalidIdentity},
		{"an empty override key", key, "", good, 0, core.ErrInvalidIdentity},
		{"the storage key itself", key, key, good, 0, core.ErrInvalidIdentity},
		{"another hash tag", key, h.otherKey("override-invalid") + ":override", good, 0, core.ErrInvalidIdentity},
	} {
		if err := o.SetOverride(ctx, c.key, c.override, c.limit, c.ttl); !errors.Is(err, c.want) {
			h.t.Errorf("SetOverride with %s: err = %v, want %v", c.what, err, c.want)
		}
		if c.limit == good && c.ttl == 0 {
			if err := o.ClearOverride(ctx, c.key, c.override); !errors.Is(err, c.want) {
				h.t.Errorf("ClearOverride with %s: err = %v, want %v", c.what, err, c.want)
			}
			if c.key != "" && c.override != "" {
				checks := []core.Check{{Key: c.key, Limit: good, Override: c.override}}
				if err := h.inputErr(checks, 1); !errors.Is(err, c.want) {
					h.t.Errorf("AllowAllN with %s: err = %v, want %v", c.what, err, c.want)
				}
			}
		}
	}
	h.expect(fmt.Sprintf("8 units under %v after the refusals", good), h.over(key, good, good, 8), true, 0)
}
