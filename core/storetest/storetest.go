package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratekit/ratekit/core"
)

// Option tells [Run] what the stores under test can do.
type Option func(*config)

type config struct {
	advance   func(time.Duration)
	synctest  bool
	leasing   bool
	afterCall func(t *testing.T, keys []string)
}

// WithAdvance gives the suite the clock of the stores under test: advance(d)
// moves it forward by d for every store newStore returns. The clock must
// stand still between calls of advance, as a fake clock does: the suite
// then checks every duration of a result to the microsecond, and runs the
// cases that step time. Without WithAdvance (or [WithSynctest]) those cases
// are skipped, as they must be for a store on a real server's clock.
func WithAdvance(advance func(d time.Duration)) Option {
	return func(c *config) { c.advance = advance }
}

// WithSynctest runs each case in a bubble of [testing/synctest], where
// time.Now is a fake clock that stands still until the suite steps it with
// time.Sleep: for a store that reads time.Now in this process, such as a
// [memorystore.Store] without [memorystore.WithClock]. newStore is then called
// inside the bubble: goroutines the store starts must end by the end of the
// case, through a cleanup registered on the t newStore is given.
func WithSynctest() Option {
	return func(c *config) { c.synctest = true }
}

// WithLeasing declares that the store may take units from a shared store
// ahead of demand and spend them locally, as a [leasestore.Store] does,
// and relaxes what the suite checks where such a store is allowed to
// differ from an exact one:
//
//   - a denied result's Remaining may be lower than an exact store's (the
//     units leased here are not counted, or a remembered denial says 0),
//     its RetryAfter is only required to be positive, and its ResetAfter
//     is not checked;
//   - an allowed result's ResetAfter may be longer (leased units count as
//     spent in the shared store); on a real clock it is not checked, as a
//     leased result ages the shared store's answer by the local clock;
//   - without a clock that stands still, leases expire on their own, so
//     concurrent callers may be admitted fewer units than the limit,
//     never more.
//
// Everything else holds as for an exact store, within one process and on
// a clock that stands still: which calls are allowed, Remaining after an
// allowed call, all-or-nothing calls of several checks (which leasing
// stores pass through), costs above capacity, input errors. The overshoot
// a leasing store documents arises only across replicas and over time, which
// one store in this suite does not exercise.
func WithLeasing() Option {
	return func(c *config) { c.leasing = true }
}

// WithAfterCall has the suite call f after each call of AllowAllN that it
// makes on a case's goroutine (all but the concurrent ones) and that
// returns no error, with the storage keys of the call's checks, so that a
// store can check what it left in its backend: for a Redis store, that
// every key written has an expiry. f may fail t.
func WithAfterCall(f func(t *testing.T, keys []string)) Option {
	return func(c *config) { c.afterCall = f }
}

// frozen reports whether the stores' clock stands still between steps.
func (c *config) frozen() bool { return c.advance != nil || c.synctest }

// Run runs the conformance suite on stores made by newStore, each case as a
// subtest of t, one after the other, never in parallel. newStore is called
// once per case (and per algorithm, for the cases run for each) with the
// subtest's t: it returns a store ready for use and registers on t whatever
// cleanup the store needs. Stores may share their backend: every case uses
// keys of its own, prefixed "storetest:" and each holding a random
// identity in a Redis Cluster hash tag, so that the keys of one call share
// a slot. A case fails on the first broken promise, naming it.
//
// Durations of results are checked to the microsecond on a clock that
// stands still ([WithAdvance], [WithSynctest]). On a real clock they are
// checked within the time the case has run so far, and the cases that
// step time are skipped; the other cases first pick a period, about an
// hour, whose current fixed window has at least ten minutes left by the
// store's own clock, so that no case straddles a window's edge.
func Run(t *testing.T, newStore func(t *testing.T) core.Store, opts ...Option) {
	t.Helper()
	cfg := &config{}
	for _, o := range opts {
		if o == nil {
			t.Fatal("storetest: nil option")
		}
		o(cfg)
	}
	if cfg.advance != nil && cfg.synctest {
		t.Fatal("storetest: WithAdvance and WithSynctest both step the clock: pass one")
	}
	for _, c := range slices.Concat(cases, quotaCases, overrideCases, chargeCases) {
		t.Run(c.name, func(t *testing.T) {
			if c.steps && !cfg.frozen() {
				t.Skip("storetest: this case steps the store's clock: run with WithAdvance or WithSynctest where the clock can be stepped")
			}
			if !c.each {
				cfg.run(t, newStore, func(h *harness) { c.run(h, core.GCRA) })
				return
			}
			for _, alg := range algorithms {
				t.Run(alg.String(), func(t *testing.T) {
					cfg.run(t, newStore, func(h *harness) { c.run(h, alg) })
				})
			}
		})
	}
}

// algorithms are the algorithms every store must implement.
var algorithms = []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter}

// run makes a store and runs body on it, in a synctest bubble if asked.
func (c *config) run(t *testing.T, newStore func(t *testing.T) core.Store, body func(h *harness)) {
	if !c.synctest {
		body(newHarness(t, c, newStore(t), c.advance))
		return
	}
	synctest.Test(t, func(t *testing.T) {
		body(newHarness(t, c, newStore(t), time.Sleep))
	})
}

// harness is one case's store and what the case needs around it.
type harness struct {
	t       *testing.T
	cfg     *config
	store   core.Store
	advance func(time.Duration) // nil when time cannot be stepped
	begun   time.Time           // when the case began, by the wall clock
	id      string              // the identity in the case's keys
	ids     int                 // identities handed out by otherKey
}

func newHarness(t *testing.T, cfg *config, s core.Store, advance func(time.Duration)) *harness {
	t.Helper()
	if s == nil {
		t.Fatal("storetest: newStore returned a nil store")
	}
	return &harness{
		t: t, cfg: cfg, store: s, advance: advance, begun: time.Now(),
		id: fmt.Sprintf("st-%016x", rand.Uint64()),
	}
}

// key returns the case's storage key for rule; keys of one case share an
// identity, so any of them may go in one call.
func (h *harness) key(rule string) string {
	return "storetest:" + rule + ":{" + h.id + "}"
}

// otherKey returns a key of rule for an identity of its own.
func (h *harness) otherKey(rule string) string {
	h.ids++
	return "storetest:" + rule + ":{" + h.id + "-" + fmt.Sprint(h.ids) + "}"
}

// step moves the store's clock forward by d.
func (h *harness) step(d time.Duration) {
	h.t.Helper()
	if d < 0 {
		h.t.Fatalf("storetest: cannot step the clock back by %v", -d)
	}
	h.advance(d)
}

// slack is how far durations may have shrunk since the case began: 0 on a
// clock that stands still.
func (h *harness) slack() time.Duration {
	if h.cfg.frozen() {
		return 0
	}
	return time.Since(h.begun)
}

// call runs AllowAllN and returns its results, checked against the promises
// every call keeps ([shape]); any error fails the case.
func (h *harness) call(checks []core.Check, n int) []core.Result {
	h.t.Helper()
	res, err := h.try(checks, n)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.cfg.afterCall != nil {
		keys := make([]string, len(checks))
		for i := range checks {
			keys[i] = checks[i].Key
		}
		h.cfg.afterCall(h.t, keys)
	}
	return res
}

// try runs AllowAllN and checks its results; safe for any goroutine.
func (h *harness) try(checks []core.Check, n int) ([]core.Result, error) {
	res, err := h.store.AllowAllN(h.t.Context(), checks, n)
	if err != nil {
		return nil, fmt.Errorf("AllowAllN(%s, %d): %w", describe(checks), n, err)
	}
	if err := shape(checks, n, res); err != nil {
		return nil, fmt.Errorf("AllowAllN(%s, %d): %w", describe(checks), n, err)
	}
	return res, nil
}

// one decides n units of one key.
func (h *harness) one(key string, l core.Limit, n int) core.Result {
	h.t.Helper()
	return h.call([]core.Check{{Key: key, Limit: l}}, n)[0]
}

// inputErr calls AllowAllN with input it must refuse, and returns its error.
func (h *harness) inputErr(checks []core.Check, n int) error {
	h.t.Helper()
	res, err := h.store.AllowAllN(h.t.Context(), checks, n)
	if err == nil {
		h.t.Errorf("AllowAllN(%s, %d) = %+v, want an error", describe(checks), n, res)
	}
	return err
}

// shape checks the promises every answer keeps, whatever came before: one
// result per check, in order, each for its check's limit; all allowed or
// none; Remaining within [0, capacity]; RetryAfter 0 when allowed, -1 for a
// cost above a limit's capacity, otherwise never negative, and at least one
// denying result that says how long to wait; ResetAfter never negative,
// and positive after units were spent.
func shape(checks []core.Check, n int, res []core.Result) error {
	if len(res) != len(checks) {
		return fmt.Errorf("%d results for %d checks", len(res), len(checks))
	}
	waits := false
	for i, r := range res {
		l := checks[i].Limit
		var bad string
		switch {
		case r.Limit != l:
			bad = fmt.Sprintf("is for limit %v, want %v (results follow the order of the checks)", r.Limit, l)
		case r.Allowed != res[0].Allowed:
			bad = fmt.Sprintf("has Allowed %v and result 0 %v: a call is allowed all or nothing", r.Allowed, res[0].Allowed)
		case r.Remaining < 0 || r.Remaining > l.Capacity():
			bad = fmt.Sprintf("has Remaining %d, outside [0, %d]", r.Remaining, l.Capacity())
		case r.ResetAfter < 0:
			bad = fmt.Sprintf("has ResetAfter %v < 0", r.ResetAfter)
		case r.Allowed && (r.RetryAfter != 0 || r.ResetAfter == 0):
			bad = fmt.Sprintf("is allowed with RetryAfter %v (want 0) and ResetAfter %v (want > 0)", r.RetryAfter, r.ResetAfter)
		case n > l.Capacity() && r.RetryAfter != -1:
			bad = fmt.Sprintf("has RetryAfter %v for a cost of %d above capacity %d, want -1 (Never)", r.RetryAfter, n, l.Capacity())
		case n <= l.Capacity() && r.RetryAfter < 0:
			bad = fmt.Sprintf("has RetryAfter %v < 0 for a cost of %d within capacity %d", r.RetryAfter, n, l.Capacity())
		}
		if bad != "" {
			return fmt.Errorf("result %d (%+v) %s", i, r, bad)
		}
		waits = waits || r.RetryAfter != 0
	}
	if !res[0].Allowed && !waits {
		return fmt.Errorf("denied, but no result has a RetryAfter to say why: %+v", res)
	}
	return nil
}

// describe prints checks for failure messages.
func describe(checks []core.Check) string {
	parts := make([]string, len(checks))
	for i, c := range checks {
		parts[i] = fmt.Sprintf("%q %v", c.Key, c.Limit)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
