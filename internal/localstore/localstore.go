// Package localstore is ratekit's in-process store engine: the same
// algorithms as the Redis scripts, giving the same answers for the same
// sequence of calls and clock. Package memorystore builds the exported
// Store on it, and package core's Limiter decides with it under
// FailLocal while its store is unreachable. It takes types of its own, so
// that core can import it: callers convert, and validate what they pass.
package localstore

import (
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/ratekit/ratekit/internal/storekey"
)

// Algorithm mirrors core.Algorithm, value for value.
type Algorithm uint8

// The algorithms, as core numbers them.
const (
	GCRA Algorithm = iota
	FixedWindow
	SlidingWindowLog
	SlidingWindowCounter
)

// maxRate mirrors core.MaxRate: a fixed-window count above it is no count.
const maxRate = 1 << 30

// maxCredit mirrors core's bound of a GCRA bucket, in µs.
const maxCredit = 1 << 49

// Limit mirrors core.Limit.
type Limit struct {
	Rate      int
	Period    time.Duration
	Burst     int
	Algorithm Algorithm
}

// Check is one limit on one key, as core.Check without its override: the
// caller applies overrides first.
type Check struct {
	Key   string
	Limit Limit
	// ResetAfter bounds, in a Refund, how long the units given back go
	// on counting, as core.Check's does: 0 for no bound, below 0 for a
	// bound already past.
	ResetAfter time.Duration
}

// Result mirrors core.Result without its Limit, which is the check's.
type Result struct {
	Allowed    bool
	Remaining  int
	RetryAfter time.Duration // -1: the cost exceeds the capacity
	ResetAfter time.Duration
}

// Store is the in-process state of keys. It is safe for concurrent use.
//
// Its memory is bounded: a key's state is ignored once it has expired (when
// Redis would have expired it) and dropped within about a second after, and
// at most maxKeys keys are kept. Keys used again within that second are
// updated in place, without allocating.
type Store struct {
	now   func() time.Time
	cache *otter.Cache[string, *memState]
	seed  maphash.Seed
	locks [256]sync.Mutex
}

// memState is the state of one key, as the scripts keep it in Redis.
type memState struct {
	alg     Algorithm // the algorithm that wrote the state, as a Redis key's type tells
	expires int64     // µs of the store's clock; the state is absent from then on
	a, b, c int64     // gcra: a = TAT, b = interval; fixed: b = count, expiring at its window's end; counter: a = window, b = current, c = previous
	log     []int64   // sliding log: admitted units' times in µs, oldest first

	// horizon is when the cache drops the entry, in µs of the store's
	// clock: expires when the entry was stored, later after an update that
	// outgrew it (see store). A state updated within its horizon is
	// rewritten in place, which costs the cache nothing, where a Set
	// allocates.
	horizon int64
}

// DefaultMaxKeys bounds a Store unless its maker says otherwise.
const DefaultMaxKeys = 1 << 20

// New returns an empty Store that reads time from now and keeps at most
// maxKeys keys (DefaultMaxKeys when 0), the least recently used dropped
// first.
func New(now func() time.Time, maxKeys int) *Store {
	if maxKeys == 0 {
		maxKeys = DefaultMaxKeys
	}
	s := &Store{now: now, seed: maphash.MakeSeed()}
	s.cache = otter.Must(&otter.Options[string, *memState]{
		MaximumSize: maxKeys,
		Clock:       memClock{now},
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, *memState]) time.Duration {
			return time.Duration(e.Value.horizon)*time.Microsecond - time.Duration(now().UnixNano())
		}),
	})
	return s
}

// memClock lets the cache expire entries by the store's clock.
type memClock struct{ now func() time.Time }

func (c memClock) NowNano() int64 { return c.now().UnixNano() }

func (c memClock) Tick(d time.Duration) <-chan time.Time { return nil }

// Close releases the store's background resources. The store keeps working
// after Close, without proactive clean-up: expired state is still ignored,
// and dropped when it is next written or evicted.
func (s *Store) Close() {
	s.cache.StopAllGoroutines()
}

// Len returns how many keys the store holds, expired ones included until
// they are cleaned up.
func (s *Store) Len() int {
	s.cache.CleanUp()
	return s.cache.EstimatedSize()
}

// memDecision is one check's outcome before anything is written.
type memDecision struct {
	ok                       bool
	remaining, retry, reset  int64
	remainingAfter, resetAft int64
	state                    memState // the state to write if every check allows
	trimmed                  bool     // a sliding log was trimmed: write trim even on deny
	trim                     memState
}

// Allow decides checks at cost n into results, one per check, all or
// nothing: n units are spent from every check's key only if every limit
// allows them, as core.Store's AllowAllN says. The caller has validated
// checks and n, and applied overrides.
func (s *Store) Allow(checks []Check, n int, results []Result) {
	if len(checks) == 1 {
		m := &s.locks[s.stripe(checks[0].Key)]
		m.Lock()
		defer m.Unlock()
	} else {
		defer s.lockMany(checks)()
	}

	now := s.now().UnixMicro()
	var (
		one    [1]memDecision
		oneCur [1]*memState
	)
	decisions, cur := one[:], oneCur[:]
	if len(checks) > 1 {
		decisions = make([]memDecision, len(checks))
		cur = make([]*memState, len(checks))
	}
	all := true
	for i := range checks {
		st, ok, p := s.read(checks[i], now)
		cur[i] = p
		decisions[i] = decide(checks[i].Limit, st, ok, now, int64(n))
		all = all && decisions[i].ok
	}
	for i := range checks {
		d := &decisions[i]
		d.state.alg, d.trim.alg = checks[i].Limit.Algorithm, checks[i].Limit.Algorithm
		if all {
			s.store(checks[i].Key, cur[i], d.state)
			results[i] = result(true, d.remainingAfter, 0, d.resetAft)
			continue
		}
		s.storeTrim(checks[i].Key, cur[i], d)
		results[i] = result(false, d.remaining, d.retry, d.reset)
	}
}

// result builds a Result from the four integers a decision yields, with
// durations in µs. Remaining below zero, which a key spent under a higher
// limit reports, is zero.
func result(allowed bool, remaining, retryUS, resetUS int64) Result {
	retry := time.Duration(retryUS) * time.Microsecond
	if retryUS < 0 {
		retry = -1
	}
	return Result{
		Allowed:    allowed,
		Remaining:  int(max(remaining, 0)),
		RetryAfter: retry,
		ResetAfter: time.Duration(resetUS) * time.Microsecond,
	}
}

// read returns the state of c's key under c's algorithm at now, whether it
// exists, and the key's cache entry (nil if none). Expired state, and state
// another algorithm wrote (the rule's changed), is absent, as the scripts
// take it; a key of another Redis type is deleted, as they delete it.
func (s *Store) read(c Check, now int64) (memState, bool, *memState) {
	p, ok := s.cache.GetIfPresent(c.Key)
	if ok && p.expires > now && p.alg == c.Limit.Algorithm {
		if p.alg == GCRA {
			rescale(p, c.Limit, now)
		}
		return *p, true, p
	}
	if ok && p.expires > now && clearsForeign(c.Limit.Algorithm, p.alg) {
		s.cache.Invalidate(c.Key)
		p = nil
	}
	return memState{}, false, p
}

// rescale rewrites a GCRA state written under another interval than
// limit's under limit's, in place, as gcra_tat in gcra.lua rewrites the key
// when it reads it: it then refills at the new rate.
func rescale(p *memState, limit Limit, now int64) {
	interval := int64(math.Ceil(float64(limit.Period.Microseconds()) / float64(limit.Rate)))
	if p.b == interval || p.a <= now {
		return
	}
	p.a, p.b = gcraTAT(*p, true, now, interval), interval
	p.expires = now + 1000*ceilMS(p.a-now)
}

// storeTrim writes a sliding log's trim when a decision that writes
// nothing else trimmed it: the script trims on every call.
func (s *Store) storeTrim(key string, cur *memState, d *memDecision) {
	if !d.trimmed {
		return
	}
	if len(d.trim.log) == 0 {
		s.cache.Invalidate(key)
	} else {
		s.store(key, cur, d.trim)
	}
}

// clearsForeign reports whether a check of alg deletes a key that alg
// wrote, even when it denies, as the scripts do: the sliding log's and the
// sliding counter's delete a key of another Redis type than their own when
// they read it. GCRA's and the fixed window's replace such a key only when
// they write (SET); their strings read as absent to each other.
func clearsForeign(alg, wrote Algorithm) bool {
	return alg != GCRA && alg != FixedWindow && alg != wrote
}

// slack is how long, in µs, a cached entry outlives the state it held
// when it was stored: a key used again within it is updated in place.
const slack = int64(time.Second / time.Microsecond)

// store writes st as key's state; cur is the key's cached entry,
// live or expired, nil if the cache has none. The entry is kept until its
// horizon, a second (slack) past the expiry of the state it was stored
// with. A later state that expires by the horizon is written in place,
// which costs the cache nothing; otherwise the entry is stored again with a
// new horizon, which allocates. A key used at least once a second thus
// costs about one Set a second however often it is used, and an expired
// key's memory is reclaimed within about a second of its expiry. Reads
// ignore state past its expiry, as Redis would have dropped it.
func (s *Store) store(key string, cur *memState, st memState) {
	if cur != nil && st.expires <= cur.horizon {
		st.horizon = cur.horizon
		*cur = st
		return
	}
	if cur == nil {
		cur = new(memState)
	}
	st.horizon = st.expires + slack
	*cur = st
	s.cache.Set(key, cur)
}

// lockMany locks the stripes of every key's hash tag, in order, and returns the
// function that unlocks them.
func (s *Store) lockMany(checks []Check) func() {
	idx := make([]int, 0, len(checks))
	for i := range checks {
		idx = append(idx, s.stripe(checks[i].Key))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		s.locks[i].Lock()
	}
	return func() {
		for _, i := range idx {
			s.locks[i].Unlock()
		}
	}
}

func (s *Store) stripe(key string) int {
	return int(maphash.String(s.seed, storekey.HashTag(key)) % uint64(len(s.locks)))
}

// decide mirrors scripts/*.lua operation for operation, in float64 where
// the scripts compute in Lua numbers, so that both give identical answers.
func decide(l Limit, st memState, exists bool, now, n int64) memDecision {
	rate := float64(l.Rate)
	period := l.Period.Microseconds()
	switch l.Algorithm {
	case FixedWindow:
		return decideFixed(rate, period, st, exists, now, n)
	case SlidingWindowLog:
		return decideLog(int64(l.Rate), period, st, now, n)
	case SlidingWindowCounter:
		return decideCounter(rate, period, st, exists, now, n)
	default:
		return decideGCRA(rate, period, int64(l.Burst), st, exists, now, n)
	}
}

func ceilMS(us int64) int64 { return (us + 999) / 1000 }

func decideGCRA(rate float64, period, burst int64, st memState, exists bool, now, n int64) memDecision {
	interval := int64(math.Ceil(float64(period) / rate))
	tolerance := interval * burst
	tat := gcraTAT(st, exists, now, interval)
	d := memDecision{
		remaining: int64(math.Floor(float64(now+tolerance-tat) / float64(interval))),
		reset:     tat - now,
	}
	newTAT := tat + n*interval
	diff := now + tolerance - newTAT
	switch {
	case n > burst:
		d.retry = -1
	case diff >= 0:
		d.ok = true
		d.remainingAfter = int64(math.Floor(float64(diff) / float64(interval)))
		d.resetAft = newTAT - now
		d.state = memState{a: newTAT, b: interval, expires: now + 1000*ceilMS(newTAT-now)}
	default:
		d.retry = -diff
	}
	return d
}

// gcraTAT returns the TAT of st under interval, never before now, as
// gcra_tat in gcra.lua reads it: a TAT written under another interval keeps
// its outstanding units, (TAT − now) / old interval, under the new one.
func gcraTAT(st memState, exists bool, now, interval int64) int64 {
	if !exists {
		return now
	}
	tat := st.a
	if st.b != interval && tat > now {
		tat = now + int64(min(math.Ceil(float64(tat-now)/float64(st.b)*float64(interval)), maxCredit))
	}
	return max(tat, now)
}

// decideFixed mirrors fixed.lua: the state is a counter b that expires at
// its window's end, a whole ms; Redis answers its PTTL in whole ms of its
// clock, and a key with none left, or with more than a period left, or
// above MaxRate, holds no count.
func decideFixed(rate float64, period int64, st memState, exists bool, now, n int64) memDecision {
	pm := period / 1000
	nowMS := now / 1000
	end := nowMS - nowMS%pm + pm
	left := end - nowMS
	var c int64
	expires := 1000 * end
	if ttl := st.expires/1000 - nowMS; exists && ttl > 0 && ttl <= pm && st.b >= 0 && st.b <= maxRate {
		c, left, expires = st.b, ttl, st.expires
	}
	wait := 1000*(left-1) + 1 // as fixedResult: never past the window's end
	d := memDecision{remaining: int64(rate) - c}
	if c > 0 {
		d.reset = wait
	}
	switch {
	case n > int64(rate):
		d.retry = -1
	case c+n <= int64(rate):
		d.ok = true
		d.remainingAfter = int64(rate) - c - n
		d.resetAft = wait
		d.state = memState{b: c + n, expires: expires}
	default:
		d.retry = wait
	}
	return d
}

func decideLog(rate, period int64, st memState, now, n int64) memDecision {
	// trim: ZREMRANGEBYSCORE -inf (now - period]
	log := st.log
	cut := 0
	for cut < len(log) && log[cut] <= now-period {
		cut++
	}
	d := memDecision{trimmed: cut > 0}
	log = log[cut:]
	c := int64(len(log))
	d.trim = memState{log: log, expires: st.expires}
	if d.trimmed && c > 0 {
		d.trim.expires = now + 1000*(ceilMS(period)+1)
	}
	d.remaining = rate - c
	if c > 0 {
		d.reset = log[c-1] + period - now
	}
	switch {
	case n > rate:
		d.retry = -1
	case c+n <= rate:
		d.ok = true
		d.remainingAfter = rate - c - n
		d.resetAft = period
		// appended in place, past the stored state's length, which no one
		// else reads under the stripe lock: nothing is copied until the
		// array is full, so a call costs the same whatever the rate
		grown := log
		for range n {
			grown = append(grown, now)
		}
		d.state = memState{log: grown, expires: now + 1000*(ceilMS(period)+1)}
	default:
		k := c + n - rate
		d.retry = log[k-1] + period - now
	}
	return d
}

func decideCounter(rate float64, period int64, st memState, exists bool, now, n int64) memDecision {
	w := int64(math.Floor(float64(now) / float64(period)))
	var c, p int64
	if exists && st.a == w {
		c, p = st.b, st.c
	} else if exists && st.a == w-1 {
		p = st.b
	}
	start := w * period
	weighted := float64(float64(p)*float64(period-(now-start))) / float64(period)
	fc, fn, fp := float64(c), float64(n), float64(p)
	d := memDecision{remaining: max(0, int64(math.Floor(rate-weighted-fc)))}
	if c > 0 {
		d.reset = start + 2*period - now
	} else if p > 0 {
		d.reset = start + period - now
	}
	switch {
	case fn > rate:
		d.retry = -1
	case weighted+fc+fn <= rate:
		d.ok = true
		d.remainingAfter = int64(math.Floor(rate - weighted - fc - fn))
		d.resetAft = start + 2*period - now
		d.state = memState{a: w, b: c + n, c: p, expires: now + 1000*(ceilMS(start+2*period-now)+1)}
	default:
		room := rate - fc - fn
		if room >= 0 {
			d.retry = int64(math.Ceil(float64(start) + float64((1-room/fp)*float64(period)) - float64(now)))
		} else {
			d.retry = int64(math.Ceil(float64(start) + float64((2-(rate-fn)/fc)*float64(period)) - float64(now)))
		}
	}
	return d
}
