package storetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/ratekit/ratekit/core"
)

// testCase is one behaviour of the contract.
type testCase struct {
	name  string
	each  bool // runs once per algorithm, as a subtest named after it
	steps bool // steps the store's clock
	run   func(h *harness, alg core.Algorithm)
}

// cases are the suite, in the order Run runs them. The package
// documentation lists what each checks.
var cases = []testCase{
	{"BurstThenDeny", true, false, burstThenDeny},
	{"Cost", true, false, cost},
	{"AllOrNothing", true, false, allOrNothing},
	{"Order", false, false, order},
	{"LimitLowered", true, false, limitLowered},
	{"Concurrent", true, false, concurrent},
	{"ConcurrentAllOrNothing", true, false, concurrentAllOrNothing},
	{"InvalidInput", false, false, invalidInput},
	{"RetryAfter", true, true, retryAfter},
	{"ResetAfter", true, true, resetAfter},
	{"Recovery", true, true, recovery},
}

// burstThenDeny spends a fresh key of 4 per period one unit at a time,
// then asks for more, checking every field of every result against what
// the algorithm computes; a cost above capacity is never allowed, and
// another identity's key is untouched.
func burstThenDeny(h *harness, alg core.Algorithm) {
	w := h.quiet()
	l := core.Limit{Rate: 4, Period: w.period, Burst: 4, Algorithm: alg}
	key := h.key("burst")
	for i := range 4 {
		what := fmt.Sprintf("unit %d of 4", i+1)
		r := h.one(key, l, 1)
		h.expect(what, r, true, 3-i)
		h.wantReset(what, r, w.quarterReset(alg, i+1))
	}
	retry, reset := w.quarterDenied(alg)
	for i := range 3 {
		what := fmt.Sprintf("denied unit %d", i+1)
		r := h.one(key, l, 1)
		h.expect(what, r, false, 0)
		h.wantRetry(what, r, retry)
		h.wantReset(what, r, reset)
	}
	h.expect("cost 5 of capacity 4", h.one(key, l, 5), false, 0)
	h.expect("another identity's key, cost 4", h.one(h.otherKey("burst"), l, 4), true, 0)
}

// cost spends units several at a time: a call is allowed only if its whole
// cost fits, and a denied call, or a cost above capacity, spends nothing.
func cost(h *harness, alg core.Algorithm) {
	w := h.quiet()
	l := core.Limit{Rate: 10, Period: w.period, Burst: 10, Algorithm: alg}
	key := h.key("cost")
	for i, s := range []struct {
		n         int
		allowed   bool
		remaining int
	}{
		{3, true, 7},
		{11, false, 7}, // above capacity: never, nothing spent
		{6, true, 1},
		{2, false, 1}, // does not fit: denied, nothing spent
		{1, true, 0},
		{math.MaxInt32, false, 0},
	} {
		h.expect(fmt.Sprintf("step %d, cost %d", i+1, s.n), h.one(key, l, s.n), s.allowed, s.remaining)
	}
	whole := h.key("cost-whole")
	h.expect("the whole capacity at once", h.one(whole, l, 10), true, 0)
	h.expect("a unit past it", h.one(whole, l, 1), false, 0)
	never := h.key("cost-never")
	h.expect("cost 11 on a fresh key", h.one(never, l, 11), false, 10)
	h.expect("cost 11 again", h.one(never, l, 11), false, 10)
	h.expect("cost 10 after them", h.one(never, l, 10), true, 0)
}

// allOrNothing decides two limits of one identity together: units are
// spent from both or from neither, whichever check denies and wherever it
// stands in the call, and a limit with room reports RetryAfter 0.
func allOrNothing(h *harness, alg core.Algorithm) {
	w := h.quiet()
	h = h.passThrough()
	loose := core.Limit{Rate: 10, Period: w.period, Burst: 10, Algorithm: algorithms[(slices.Index(algorithms, alg)+1)%len(algorithms)]}
	tight := core.Limit{Rate: 3, Period: w.period, Burst: 3, Algorithm: alg}
	small := core.Limit{Rate: 2, Period: w.period, Burst: 2, Algorithm: alg}
	kl, kt, ks := h.key("loose"), h.key("tight"), h.key("small")
	for i := range 3 {
		res := h.call([]core.Check{{Key: kl, Limit: loose}, {Key: kt, Limit: tight}}, 1)
		h.expect(fmt.Sprintf("call %d, loose", i+1), res[0], true, 9-i)
		h.expect(fmt.Sprintf("call %d, tight", i+1), res[1], true, 2-i)
	}
	for _, c := range []struct {
		what   string
		checks []core.Check
		n      int
		room   int // index of the loose limit, which has room
	}{
		{"tight last", []core.Check{{Key: kl, Limit: loose}, {Key: kt, Limit: tight}}, 1, 0},
		{"tight first", []core.Check{{Key: kt, Limit: tight}, {Key: kl, Limit: loose}}, 1, 1},
		{"cost 3 above a capacity of 2", []core.Check{{Key: kl, Limit: loose}, {Key: ks, Limit: small}}, 3, 0},
	} {
		res := h.call(c.checks, c.n)
		h.expect(c.what+", loose", res[c.room], false, 7)
		h.wantRetry(c.what+", loose", res[c.room], 0)
	}
	h.expect("the small limit, untouched", h.one(ks, small, 2), true, 0)
	h.expect("the loose limit alone, all it has left", h.one(kl, loose, 7), true, 0)
}

// order decides several checks in one call and in the reverse order: each
// result is its check's, whatever the order, among limits that differ and
// keys of one limit that differ in what they have left.
func order(h *harness, _ core.Algorithm) {
	w := h.quiet()
	same := core.Limit{Rate: 8, Period: w.period, Burst: 8, Algorithm: core.SlidingWindowLog}
	checks := []core.Check{{Key: h.key("order-same-a"), Limit: same}}
	for i := range 4 {
		l := core.Limit{Rate: 5 + i, Period: w.period, Burst: 5 + i, Algorithm: algorithms[i]}
		checks = append(checks, core.Check{Key: h.key(fmt.Sprintf("order-%d", i)), Limit: l})
	}
	checks = append(checks, core.Check{Key: h.key("order-same-b"), Limit: same})
	h.expect("spending 3 of one key first", h.one(checks[0].Key, same, 3), true, 5)
	spent := map[string]int{checks[0].Key: 3}
	for round, n := range []int{2, 1} {
		if round == 1 {
			slices.Reverse(checks)
		}
		res := h.call(checks, n)
		for i, c := range checks {
			spent[c.Key] += n
			h.expect(fmt.Sprintf("round %d, result %d (%s)", round+1, i, c.Key), res[i], true, c.Limit.Rate-spent[c.Key])
		}
	}
}

// limitLowered spends a key under one limit, then asks under a lower one,
// as after a configuration change while keys are live: the store denies
// with nothing remaining, and never fails.
func limitLowered(h *harness, alg core.Algorithm) {
	w := h.quiet()
	high := core.Limit{Rate: 100, Period: w.period, Burst: 100, Algorithm: alg}
	low := core.Limit{Rate: 10, Period: w.period, Burst: 10, Algorithm: alg}
	if alg == core.GCRA {
		low.Burst = 2
	}
	key := h.key("lowered")
	for i := range 50 {
		h.expect(fmt.Sprintf("unit %d under %v", i+1, high), h.one(key, high, 1), true, 99-i)
	}
	for _, n := range []int{1, 2} {
		h.expect(fmt.Sprintf("cost %d under %v after 50 under %v", n, low, high), h.one(key, low, n), false, 0)
	}
}

// crowd makes calls of checks from workers goroutines at once, each
// calling calls times, and returns the last result of each allowed call;
// any error fails the case.
func (h *harness) crowd(workers, calls int, checks []core.Check) []core.Result {
	h.t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed []core.Result
		errs    []error
	)
	for range workers {
		wg.Go(func() {
			for range calls {
				res, err := h.try(checks, 1)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if res[0].Allowed {
					allowed = append(allowed, res[len(res)-1])
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		h.t.Fatalf("%d of %d concurrent calls failed: %v", len(errs), workers*calls, errors.Join(errs...))
	}
	return allowed
}

// concurrent sends twice a key's capacity from 16 goroutines at once:
// exactly the capacity is admitted, and each admitted call leaves a
// different Remaining, as if the calls had run one after the other.
func concurrent(h *harness, alg core.Algorithm) {
	w := h.quiet()
	const capacity = 40
	l := core.Limit{Rate: capacity, Period: w.period, Burst: capacity, Algorithm: alg}
	key := h.key("concurrent")
	allowed := h.crowd(16, 5, []core.Check{{Key: key, Limit: l}})
	left := make([]bool, capacity)
	for _, r := range allowed {
		if left[r.Remaining] {
			h.t.Fatalf("two admitted calls both left Remaining %d: decisions interleaved", r.Remaining)
		}
		left[r.Remaining] = true
	}
	if h.cfg.leasing && !h.cfg.frozen() && len(allowed) <= capacity {
		return // leases that expired unspent may have cost some units
	}
	if len(allowed) != capacity {
		h.t.Fatalf("%d of 80 concurrent calls admitted under %v, want %d", len(allowed), l, capacity)
	}
	h.expect("one more unit", h.one(key, l, 1), false, 0)
}

// concurrentAllOrNothing sends calls of two limits from 16 goroutines at
// once: the tight limit admits exactly its capacity, and the loose one is
// spent by exactly those calls.
func concurrentAllOrNothing(h *harness, alg core.Algorithm) {
	w := h.quiet()
	const tightCap, looseCap = 20, 100
	tight := core.Limit{Rate: tightCap, Period: w.period, Burst: tightCap, Algorithm: alg}
	loose := core.Limit{Rate: looseCap, Period: w.period, Burst: looseCap, Algorithm: algorithms[(slices.Index(algorithms, alg)+1)%len(algorithms)]}
	kl, kt := h.key("crowd-loose"), h.key("crowd-tight")
	allowed := h.crowd(16, 4, []core.Check{{Key: kl, Limit: loose}, {Key: kt, Limit: tight}})
	if len(allowed) != tightCap {
		h.t.Fatalf("%d of 64 concurrent calls admitted under %v, want %d", len(allowed), tight, tightCap)
	}
	h.expect("the loose limit alone, all it has left", h.one(kl, loose, looseCap-tightCap), true, 0)
	h.expect("one more unit of it", h.one(kl, loose, 1), false, 0)
}
