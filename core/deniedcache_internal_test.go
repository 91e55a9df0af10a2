package core

import (
	"fmt"
	"testing"
	"time"
)

// TestDeniedCacheCountsItsEntries holds the count that lets lookup skip an
// empty cache to what the cache holds through every way an entry comes and
// goes: a denial recorded, recorded again (a replacement), handed over by
// its leader to a fresh entry or to nothing, forgotten, evicted for room,
// and cleared. The count may run ahead of the cache, never behind it: a
// count of zero over a cache that holds a denial would let the denial
// through to the store.
func TestDeniedCacheCountsItsEntries(t *testing.T) {
	var now int64
	c := newDeniedCache(8, func() int64 { return now })
	t.Cleanup(c.close)
	limit := PerSecond(1)
	deny := []Result{{Limit: limit, RetryAfter: time.Second, ResetAfter: time.Second}}
	check := func(key string) []Check { return []Check{{Key: key, Limit: limit}} }
	settle := func(want int) {
		t.Helper()
		c.cache.CleanUp()
		if got, held := c.entries.Load(), c.cache.EstimatedSize(); got != int64(held) || held != want {
			t.Fatalf("count %d, cache holds %d: want both %d", got, held, want)
		}
	}

	if hit, _, _ := c.lookup(check("a"), 1, now, make([]Result, 1), nil, true); hit {
		t.Fatal("an empty cache answered")
	}
	c.record(check("a"), 1, now, deny, nil, c.generation())
	c.record(check("b"), 1, now, deny, nil, c.generation())
	settle(2)
	c.record(check("a"), 1, now, deny, nil, c.generation()) // replaces a's entry
	settle(2)
	if hit, _, _ := c.lookup(check("a"), 1, now, make([]Result, 1), nil, true); !hit {
		t.Fatal("a recorded denial was not found")
	}

	// a's denial expires: one caller leads the entry, and its answer (no
	// room left) puts a fresh entry in its place
	now += int64(2 * time.Second)
	_, _, leads := c.lookup(check("a"), 1, now, make([]Result, 1), nil, true)
	if len(leads) != 1 {
		t.Fatalf("%d leads of an expired entry, want 1", len(leads))
	}
	c.record(check("a"), 1, now, []Result{{Allowed: true, Limit: limit}}, leads, c.generation())
	settle(2)
	// that entry's leader is answered with room left: the entry goes
	_, _, leads = c.lookup(check("a"), 1, now, make([]Result, 1), nil, true)
	if len(leads) != 1 {
		t.Fatalf("%d leads of a coalescing entry, want 1", len(leads))
	}
	c.record(check("a"), 1, now, []Result{{Allowed: true, Limit: limit, Remaining: 1}}, leads, c.generation())
	settle(1)
	c.forget("b")
	settle(0)

	for i := range 20 { // more than the cache holds
		c.record(check(fmt.Sprint("k", i)), 1, now, deny, nil, c.generation())
		c.cache.CleanUp()
		if got, held := c.entries.Load(), c.cache.EstimatedSize(); got < int64(held) {
			t.Fatalf("after %d denials: count %d below the %d entries held", i+1, got, held)
		}
	}
	settle(c.cache.EstimatedSize())
	c.clear()
	settle(0)
}
