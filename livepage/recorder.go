package livepage

import (
	"context"
	"errors"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratekit/core"
)

// RecorderOptions configure a [Recorder]. The zero value is valid.
type RecorderOptions struct {
	// Counters is how many identities each summary of top offenders keeps
	// per rule: denied ones, and ones near their limit. Memory per rule is
	// fixed by it, whatever the number of identities; a reported count is
	// at most n/Counters above the truth, for n the units counted, and
	// every identity above that is listed. 0 means [DefaultCounters].
	Counters int
	// NearShare is the share of a limit within which an allowed identity
	// counts as near it: allowed with at most this share of its capacity
	// remaining. 0 means 0.1.
	NearShare float64
	// Window is how long offenders are counted: the page shows the counts
	// of the current window and the one before it. 0 means 5 minutes.
	Window time.Duration
	// Fleet, when set, is where the Recorder publishes its summary of
	// denied identities every PublishEvery, and where the page reads the
	// fleet's. Nil: this process's view alone.
	Fleet Fleet
	// Process names this process in the fleet; empty means host:pid.
	Process string
	// PublishEvery is how often the summary goes to the fleet; 0 means 3
	// seconds. Each publication lives three intervals.
	PublishEvery time.Duration
}

// Recorder is a [core.IdentityObserver] that keeps, in fixed memory, what
// the live page shows of a Limiter: per rule, decisions per second over
// the last minutes and the top offenders; the store's call latencies,
// errors and breaker state. Register it with [core.WithObserver]. It is
// safe for concurrent use; each decision costs a few atomic additions and,
// for a denial or an identity near its limit, a short lock of its rule's
// summaries. A goroutine samples the counters each second and publishes
// to the fleet; [Recorder.Close] stops it.
type Recorder struct {
	opts    RecorderOptions
	rules   atomic.Pointer[map[string]*ruleStats]
	recent  [recentSlots]atomic.Pointer[ruleStats] // rules found lately, by recentSlot
	mu      sync.Mutex                             // guards adding rules
	store   storeStats
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started time.Time
}

// seriesLen is how many seconds of decisions per second a rule keeps.
const seriesLen = 300

// ruleStats is what a Recorder keeps of one rule.
type ruleStats struct {
	name      string
	limit     atomic.Pointer[core.Limit]
	shadow    atomic.Bool
	allowed   atomic.Uint64
	denied    atomic.Uint64
	shadowDen atomic.Uint64
	degraded  atomic.Uint64

	mu              sync.Mutex
	deniedNow, near *spaceSaving // this window's
	deniedPrev      *spaceSaving
	nearPrev        *spaceSaving

	// the series, written by the sampler alone under mu
	last   [3]uint64 // allowed, denied, shadow denied at the last sample
	series [seriesLen][3]uint32
	head   int // the next slot
	filled int
	at     time.Time // the time of the newest slot
}

// NewRecorder returns a Recorder with opts, and starts its sampler.
func NewRecorder(opts RecorderOptions) (*Recorder, error) {
	if opts.Counters < 0 || opts.NearShare < 0 || opts.NearShare >= 1 || opts.Window < 0 || opts.PublishEvery < 0 {
		return nil, errors.New("livepage: RecorderOptions: negative Counters, Window or PublishEvery, or NearShare outside [0, 1)")
	}
	if opts.Counters == 0 {
		opts.Counters = DefaultCounters
	}
	if opts.NearShare == 0 {
		opts.NearShare = 0.1
	}
	if opts.Window == 0 {
		opts.Window = 5 * time.Minute
	}
	if opts.PublishEvery == 0 {
		opts.PublishEvery = 3 * time.Second
	}
	if opts.Process == "" {
		opts.Process = processName()
	}
	r := &Recorder{opts: opts, stop: make(chan struct{}), done: make(chan struct{}), started: time.Now()}
	m := map[string]*ruleStats{}
	r.rules.Store(&m)
	go r.run()
	return r, nil
}

// Close stops the Recorder's goroutine and waits for it. It is idempotent
// and returns nil. The Recorder keeps counting after Close, but its
// series and the fleet's view no longer move.
func (r *Recorder) Close() error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	return nil
}

// Decided is called for each rule result by a Limiter that does not pass
// identities: the decision is counted, but no offender recorded.
func (r *Recorder) Decided(ctx context.Context, e core.DecisionEvent) {
	r.DecidedIdentity(ctx, e, "")
}

// DecidedIdentity counts e, and its identity among the rule's offenders
// when it was denied or came near its limit.
func (r *Recorder) DecidedIdentity(_ context.Context, e core.DecisionEvent, identity string) {
	s := r.rule(e.Rule, &e)
	if e.Degraded {
		s.degraded.Add(1)
	}
	switch {
	case e.Allowed:
		s.allowed.Add(1)
		capacity := e.Limit.Capacity()
		if identity == "" || float64(e.Remaining) > r.opts.NearShare*float64(capacity) {
			return
		}
		s.seen(&e)
		s.mu.Lock()
		s.near.add(identity, 1)
		s.mu.Unlock()
		return
	case e.Shadow:
		s.shadowDen.Add(1)
	default:
		s.denied.Add(1)
	}
	s.seen(&e)
	if identity != "" {
		s.mu.Lock()
		s.deniedNow.add(identity, 1)
		s.mu.Unlock()
	}
}

// rule returns the stats of the named rule, made on first sight. The
// rule's limit and shadow state are kept from its first decision and from
// every denial and near-limit allowance (the slow path), so an allowance
// costs no more than a map look-up and an atomic addition.
func (r *Recorder) rule(name string, e *core.DecisionEvent) *ruleStats {
	slot := &r.recent[recentSlot(name)]
	if s := slot.Load(); s != nil && s.name == name {
		return s
	}
	if s := (*r.rules.Load())[name]; s != nil {
		slot.Store(s)
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.rules.Load()
	if s := old[name]; s != nil {
		return s
	}
	k := r.opts.Counters
	s := &ruleStats{name: name, deniedNow: newSpaceSaving(k), deniedPrev: newSpaceSaving(k),
		near: newSpaceSaving(k), nearPrev: newSpaceSaving(k), at: time.Now()}
	lim := e.Limit
	s.limit.Store(&lim)
	s.shadow.Store(e.Shadow)
	m := make(map[string]*ruleStats, len(old)+1)
	for n, v := range old {
		m[n] = v
	}
	m[name] = s
	r.rules.Store(&m)
	return s
}

// recentSlots is how many rules a Recorder finds without its map: a
// Limiter's rules, which come back decision after decision, each in a slot
// of its own unless two names share a slot, whose rules then take turns.
const recentSlots = 16

// recentSlot is the slot of the rule named name among a Recorder's recent
// ones: a hash of its length and three of its bytes, cheaper than the
// map's, and as good for the few names of one Limiter.
func recentSlot(name string) int {
	n := len(name)
	if n == 0 {
		return 0
	}
	h := uint(n)*31 + uint(name[0])*7 + uint(name[n/2])*3 + uint(name[n-1])
	return int(h % recentSlots)
}

// seen keeps the limit and shadow state of e's rule.
func (s *ruleStats) seen(e *core.DecisionEvent) {
	if e.Shadow != s.shadow.Load() {
		s.shadow.Store(e.Shadow)
	}
	if l := s.limit.Load(); l == nil || *l != e.Limit {
		lim := e.Limit
		s.limit.Store(&lim)
	}
}

// StoreCalled counts a store call's latency and error.
func (r *Recorder) StoreCalled(d time.Duration, err error) {
	r.store.calls.Add(1)
	if err != nil {
		r.store.errors.Add(1)
	}
	r.store.latency.add(d)
}

// BreakerChanged keeps the breaker's state.
func (r *Recorder) BreakerChanged(_, to core.BreakerState) {
	r.store.breaker.Store(int32(to))
	if to == core.BreakerOpen {
		r.store.openings.Add(1)
	}
}

// storeStats is what a Recorder keeps of the store.
type storeStats struct {
	calls, errors, openings atomic.Uint64
	breaker                 atomic.Int32
	latency                 histogram
}

// histogram counts durations in buckets of a quarter of a power of two
// (about 19% wide), from a microsecond up: two generations, the current
// and the last, swapped each minute, so percentiles cover one to two
// minutes.
type histogram struct {
	gen  atomic.Int32
	gens [2][histBuckets]atomic.Uint64
}

const histBuckets = 4 * 40

func bucketOf(d time.Duration) int {
	us := uint64(max(d/time.Microsecond, 1))
	e := bits.Len64(us) - 1 // us in [2^e, 2^(e+1))
	var frac uint64
	if e >= 2 {
		frac = us >> (e - 2) & 3
	} else {
		frac = us << (2 - e) & 3
	}
	return min(e*4+int(frac), histBuckets-1)
}

// bucketTop returns the upper bound of bucket b.
func bucketTop(b int) time.Duration {
	e, frac := b/4, b%4
	return time.Duration(float64(uint64(1)<<e)*(1+float64(frac+1)/4)) * time.Microsecond
}

func (h *histogram) add(d time.Duration) {
	h.gens[h.gen.Load()&1][bucketOf(d)].Add(1)
}

// rotate makes the older generation the current one, emptied.
func (h *histogram) rotate() {
	next := (h.gen.Load() + 1) & 1
	for i := range h.gens[next] {
		h.gens[next][i].Store(0)
	}
	h.gen.Store(next)
}

// percentiles returns the given quantiles of both generations, and the
// count: each the upper bound of its bucket.
func (h *histogram) percentiles(qs ...float64) ([]time.Duration, uint64) {
	var counts [histBuckets]uint64
	var n uint64
	for g := range h.gens {
		for i := range counts {
			c := h.gens[g][i].Load()
			counts[i] += c
			n += c
		}
	}
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out, 0
	}
	for j, q := range qs {
		want := max(uint64(math.Ceil(q*float64(n))), 1) // nearest rank
		var seen uint64
		for i, c := range counts {
			seen += c
			if seen >= want {
				out[j] = bucketTop(i)
				break
			}
		}
	}
	return out, n
}
