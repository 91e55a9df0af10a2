package core

import (
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// defaultDeniedCacheSize is how many denied keys a Limiter remembers unless
// [WithDeniedCache] says otherwise.
const defaultDeniedCacheSize = 1 << 16

// deniedGrace is how long an expired denial is kept to coalesce the calls
// that find it: the first goes to the store, the others wait for its answer.
const deniedGrace = time.Second

// deniedCache remembers what the store denied, so that a client hammering
// past its limit costs the store nothing until its retry-after.
//
// It is exact: it denies only what the store would deny at that moment.
// The store denied a cost n for a key at some instant T ≥ t0, where t0 is
// the local time taken before the call was sent, and said no cost ≥ n could
// pass before T + RetryAfter. Spending only ever pushes that instant later
// (a GCRA arrival time, a window's count and a log's members only grow), so
// every request of cost ≥ n under the same limit that arrives before
// t0 + RetryAfter ≤ T + RetryAfter would be denied by the store too.
//
// It relies on the store keeping its state and its clock: a Redis that
// restarts empty while no call fails would allow again what the cache still
// denies, for at most the retry-after of each entry. The cache is emptied
// whenever the circuit breaker closes after an outage.
type deniedCache struct {
	cache *otter.Cache[string, *deniedEntry]
	// entries is never below the number of entries in cache: it counts
	// each entry up before it is written and down as otter deletes it
	// (replaced, invalidated, expired or evicted), so that lookup skips
	// the cache while it holds nothing, as on the allowing path.
	entries atomic.Int64
	// forgets counts the calls of forget and clear: a store call that
	// began before one of them may answer with a denial the reset
	// undid, which record must not keep (see generation).
	forgets atomic.Uint64
}

// deniedEntry is what the store said about one key: no cost ≥ n under limit
// passes before until. An entry is immutable once published, but for its
// lead flag.
type deniedEntry struct {
	key     string
	limit   Limit
	applied Limit // the limit the store decided under: limit, or an override of it
	n       int
	until   int64 // mono time; 0 for an entry that only coalesces callers
	resetAt int64 // mono time when the key was to be full again
	// lead is taken by the one caller that asks the store once the entry
	// has expired; the others wait for done, closed when it has answered.
	lead atomic.Bool
	done chan struct{}
}

// newDeniedCache returns a cache of at most size keys, whose entries expire
// a deniedGrace after their until by the clock mono.
func newDeniedCache(size int, mono func() int64) *deniedCache {
	c := &deniedCache{}
	c.cache = otter.Must(&otter.Options[string, *deniedEntry]{
		MaximumSize: size,
		// atomic with the deletion, so that entries never counts below
		// what the cache holds
		OnAtomicDeletion: func(otter.DeletionEvent[string, *deniedEntry]) { c.entries.Add(-1) },
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, *deniedEntry]) time.Duration {
			return time.Duration(max(0, e.Value.until-mono())) + deniedGrace
		}),
	})
	return c
}

// close stops the cache's background clean-up.
func (c *deniedCache) close() {
	if c != nil {
		c.cache.StopAllGoroutines()
	}
}

// forget forgets the denial of key, if any, and any denial that a store
// call in flight is to record.
func (c *deniedCache) forget(key string) {
	if c != nil {
		c.forgets.Add(1)
		c.cache.Invalidate(key)
	}
}

// clear forgets every denial, and any that a store call in flight is to
// record.
func (c *deniedCache) clear() {
	if c != nil {
		c.forgets.Add(1)
		c.cache.InvalidateAll()
	}
}

// generation returns what record takes to tell whether a denial was
// forgotten while the store decided it: read before the store call goes
// out. A reset can land in Redis after the call decided and before its
// answer is recorded; the denial it undid would otherwise be remembered
// until its retry-after.
func (c *deniedCache) generation() uint64 {
	if c == nil {
		return 0
	}
	return c.forgets.Load()
}

// lookup reports whether the group of checks, of cost n, is denied at now by
// a denial the store made, and fills results if so. A group is denied when
// any of its keys is: the store decides a group all or nothing.
//
// Otherwise, when coalesce is set, it takes the lead of every expired entry
// of the group that nobody leads yet, appending it to leads, which it
// returns, and returns an entry led by another caller to wait for, if the
// group leads none. A group that leads an entry never waits, so no two
// groups wait for each other.
//
// A hit allocates nothing.
func (c *deniedCache) lookup(checks []Check, n int, now int64, results []Result, leads []*deniedEntry, coalesce bool) (hit bool, wait *deniedEntry, led []*deniedEntry) {
	if c.entries.Load() == 0 {
		return false, nil, leads // nothing denied, nothing to coalesce
	}
	var found [maxChecks]*deniedEntry
	for i := range checks {
		e, ok := c.cache.GetIfPresent(checks[i].Key)
		if !ok || e.limit != checks[i].Limit {
			continue
		}
		found[i] = e
		if now < e.until && e.n <= n {
			hit = true
		}
	}
	if hit {
		for i := range checks {
			e := found[i]
			if e != nil && now < e.until && e.n <= n {
				retry := time.Duration(e.until - now)
				results[i] = Result{Limit: e.applied, RetryAfter: retry, ResetAfter: max(retry, time.Duration(e.resetAt-now))}
				continue
			}
			// another key of the group denies: this one's state is not
			// known without the store
			results[i] = Result{Limit: checks[i].Limit}
		}
		return true, nil, leads
	}
	if !coalesce {
		return false, nil, leads
	}
	for i := range checks {
		e := found[i]
		if e == nil || now < e.until {
			continue
		}
		if e.lead.CompareAndSwap(false, true) {
			leads = append(leads, e)
		} else if wait == nil {
			wait = e
		}
	}
	if len(leads) > 0 {
		return false, nil, leads
	}
	return false, wait, leads
}

// record remembers the denials among results, which the store answered for
// checks at cost n on a call sent at t0, when the cache was at generation
// gen, and hands over the entries the caller leads: each is replaced by the
// new denial of its key, if any, or by a fresh entry whose lead the
// waiters compete for while the key has no room left, and its waiters are
// woken.
//
// A denial is dropped again when anything was forgotten since gen: forget
// counts before it invalidates, so either it sees the entry written here
// or record sees its count.
func (c *deniedCache) record(checks []Check, n int, t0 int64, results []Result, leads []*deniedEntry, gen uint64) {
	for i := range checks {
		r := &results[i]
		if r.Allowed || r.RetryAfter <= 0 {
			continue
		}
		e := &deniedEntry{
			key:     checks[i].Key,
			limit:   checks[i].Limit,
			applied: r.Limit,
			n:       n,
			until:   t0 + int64(r.RetryAfter),
			resetAt: t0 + int64(r.ResetAfter),
			done:    make(chan struct{}),
		}
		c.entries.Add(1)
		c.cache.Set(e.key, e)
		if c.forgets.Load() != gen {
			c.replace(e, nil)
		}
	}
	for _, e := range leads {
		replaced := false
		for i := range checks {
			if checks[i].Key != e.key {
				continue
			}
			r := &results[i]
			switch {
			case !r.Allowed && r.RetryAfter > 0:
				replaced = true
			case r.Remaining == 0:
				// the next request will most likely be denied: let one
				// caller at a time find out
				c.replace(e, &deniedEntry{key: e.key, limit: e.limit, done: make(chan struct{})})
				replaced = true
			}
			break
		}
		if !replaced {
			// room left: callers need not queue any longer
			c.replace(e, nil)
		}
		close(e.done)
	}
}

// release hands over entries led by a caller that did not get the store's
// answer: their waiters are woken, and try on their own.
func (c *deniedCache) release(leads []*deniedEntry) {
	if c == nil {
		return
	}
	for _, e := range leads {
		c.replace(e, nil)
		close(e.done)
	}
}

// replace puts next (nil: nothing) in place of old, if old is still the
// key's entry.
func (c *deniedCache) replace(old, next *deniedEntry) {
	c.cache.ComputeIfPresent(old.key, func(cur *deniedEntry) (*deniedEntry, otter.ComputeOp) {
		switch {
		case cur != old:
			return cur, otter.CancelOp
		case next == nil:
			return nil, otter.InvalidateOp
		}
		c.entries.Add(1) // old's deletion counts it down
		return next, otter.WriteOp
	})
}
