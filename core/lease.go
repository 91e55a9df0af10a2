package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/maypok86/otter/v2"
)

// LeasingStore wraps a shared [Store] so that a hot key costs the shared
// store one call per lease instead of one per decision: when a key is hot, a
// decision takes a batch of units from the shared store at once and the
// replica spends them locally for a short hold. Unused units expire with
// the lease. Cold keys pass straight through, one call per decision.
//
// The price is a bounded overshoot. Leased units are spent up to the hold
// after they were taken, possibly in the limit's next window, so per window
// the total admitted by all replicas is at most
//
//	limit + (lease size − 1) × replicas
//
// and never less than the limit minus what leases let expire unspent. The
// lease size is [LeasingStore.LeaseSize]: by default 1/64 of the limit's
// capacity (at most 65,536), so that each replica overshoots by less than
// 1/64 of the limit, and a limit below 128 is not leased at all. Use it for
// keys so hot that the shared store's round trips are the cost that
// matters; leave it off where each unit must be exact.
//
// Calls of one check are leased, as a [Limiter] makes them for the rules of
// one identity alone in their group; calls of several checks, and of a
// check that names an override key ([Check.Override]), pass through. A LeasingStore is safe for concurrent use; Close it to
// release its cache.
type LeasingStore struct {
	inner   Store
	size    int // most units a lease takes; 0 for LeaseSize's default
	hold    time.Duration
	now     func() time.Time
	leases  *otter.Cache[string, *lease] // by storage key
	maxKeys int
}

// lease is one key's local state. Holding mu across the shared store's call
// makes one goroutine fetch a lease while the others of this replica wait to
// spend from it.
type lease struct {
	mu      sync.Mutex
	limit   Limit     // the limit of the units and denial below
	units   int       // leased units not yet spent
	expires time.Time // units are void from then on
	last    Result    // the shared store's answer that granted the units
	granted time.Time // when it came
	// a denial of deniedCost or more units stands until deniedUntil: the
	// shared store said so, timed from before it was asked
	deniedUntil time.Time
	deniedCost  int
	// demand: decisions seen in the current and the previous hold interval
	window     time.Time
	seen, prev int
}

const (
	// leaseShare is the default lease size as a fraction of the limit's
	// capacity: 1/leaseShare.
	leaseShare = 64
	// maxAutoLease caps the default lease size: past it a hot key's round
	// trips are rare next to its local decisions even at millions a second
	// (a replica deciding a million a second fetches every 65ms, where the
	// earlier cap of 1024 had it stall on a round trip every millisecond).
	maxAutoLease = 1 << 16
)

// LeaseSize returns the most units one lease takes under limit: the size
// set by [WithLeaseSize], capped by the limit's capacity, or by default
// capacity/64, at least 1 and at most 65,536. A size of 1 means every
// decision under limit goes to the shared store. Per window, replicas
// together admit at most limit + (LeaseSize − 1) × replicas.
func (s *LeasingStore) LeaseSize(limit Limit) int {
	if s.size > 0 {
		return min(s.size, limit.Capacity())
	}
	return min(max(1, limit.Capacity()/leaseShare), maxAutoLease)
}

// NewLeasingStore returns a LeasingStore over inner, usually a
// [RedisStore]. It takes [WithLeaseSize], [WithLeaseHold] and [WithClock],
// and returns an error for a nil store and for any other option.
func NewLeasingStore(inner Store, opts ...Option) (*LeasingStore, error) {
	if inner == nil {
		return nil, errors.New("ratekit: NewLeasingStore: nil store")
	}
	cfg, err := newConfig(forLeasing, nil, opts)
	if err != nil {
		return nil, err
	}
	s := &LeasingStore{inner: inner, size: cfg.leaseSize, hold: cfg.leaseHold, now: cfg.now(), maxKeys: 1 << 16}
	if s.hold == 0 {
		s.hold = defaultLeaseHold
	}
	s.leases = otter.Must(&otter.Options[string, *lease]{
		MaximumSize:      s.maxKeys,
		ExpiryCalculator: otter.ExpiryAccessing[string, *lease](10 * s.hold),
	})
	return s, nil
}

// defaultLeaseHold is how long leased units may be spent unless
// [WithLeaseHold] says otherwise.
const defaultLeaseHold = 100 * time.Millisecond

// Traits reports what the inner store promises: a lease spent locally
// keeps any deadline, and a call the inner store makes keeps what it
// promises.
func (s *LeasingStore) Traits() Traits { return TraitsOf(s.inner) }

// Close stops the lease cache's background clean-up. It does not close the
// inner store.
func (s *LeasingStore) Close() error {
	s.leases.StopAllGoroutines()
	return nil
}

// allowOne decides from the key's lease when it holds n units, and
// otherwise asks the inner store: for a lease when the key is hot, else for
// n units. The Result of a leased decision reports the shared store's
// remaining units plus those still leased here.
func (s *LeasingStore) allowOne(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	if err := validate([]Check{{Key: key, Limit: limit}}, n); err != nil {
		return Result{}, err
	}
	if n > limit.Capacity() {
		// never allowed: the shared store says so, spending nothing, and
		// no lease may be taken for it
		return s.innerOne(ctx, key, limit, n)
	}
	l := s.leaseOf(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.under(limit)
	now := s.now()
	l.count(now, s.hold)
	if !now.Before(l.expires) {
		l.units = 0
	}
	if l.units >= n {
		l.units -= n
		return l.result(now), nil
	}
	if now.Before(l.deniedUntil) && n >= l.deniedCost {
		return Result{Limit: limit, RetryAfter: l.deniedUntil.Sub(now), ResetAfter: l.deniedUntil.Sub(now)}, nil
	}
	// a key is hot once it saw two decisions in this hold interval or the
	// previous one; it leases that demand, up to the lease size, so a key
	// that turns hot takes leases that double until they reach the size
	want := n
	if demand := max(l.prev, l.seen); demand >= 2 {
		want = min(max(n, min(s.LeaseSize(limit), demand)), limit.Capacity())
	}
	res, err := s.innerOne(ctx, key, limit, want)
	if err != nil {
		return Result{}, err
	}
	if !res.Allowed && want > n {
		// the lease did not fit: take what remains if it covers n (a
		// Remaining below n means n is denied too), else ask for n exactly
		// to learn its own wait
		want = n
		if res.Remaining > n {
			want = res.Remaining
		}
		now = s.now()
		if res, err = s.innerOne(ctx, key, limit, want); err != nil {
			return Result{}, err
		}
	}
	if !res.Allowed {
		if res.RetryAfter > 0 && want == n {
			l.deniedUntil, l.deniedCost = now.Add(res.RetryAfter), n
		}
		return res, nil
	}
	l.units, l.expires, l.last, l.granted = want-n, now.Add(s.hold), res, now
	return l.result(now), nil
}

// under readies the lease for a decision under limit: what was leased or
// denied under another limit (the rule changed) does not hold under it.
func (l *lease) under(limit Limit) {
	if l.limit != limit {
		l.limit, l.units, l.deniedUntil, l.deniedCost = limit, 0, time.Time{}, 0
	}
}

// count records a decision in the key's demand windows.
func (l *lease) count(now time.Time, hold time.Duration) {
	switch d := now.Sub(l.window); {
	case d >= 2*hold || d < 0:
		l.window, l.seen, l.prev = now, 0, 0
	case d >= hold:
		l.window, l.prev, l.seen = l.window.Add(hold), l.seen, 0
	}
	l.seen++
}

// result is the answer to a decision spent from the lease: the shared
// store's answer, aged by the time since it came, with the units still
// leased here counted as remaining.
func (l *lease) result(now time.Time) Result {
	r := l.last
	r.Remaining = min(r.Remaining+l.units, r.Limit.Capacity())
	r.ResetAfter = max(0, r.ResetAfter-now.Sub(l.granted))
	return r
}

// AllowAllN decides one check from a lease when its key is hot, and passes
// several through to the inner store: several limits are decided together,
// never from leases. The Result of a leased decision reports the shared
// store's remaining units plus those still leased here. A [Limiter]
// calls it for every decision, so rules of one identity alone in their
// store call are leased through every middleware.
func (s *LeasingStore) AllowAllN(ctx context.Context, checks []Check, n int) ([]Result, error) {
	if len(checks) != 1 || checks[0].Override != "" {
		return s.inner.AllowAllN(ctx, checks, n)
	}
	res, err := s.allowOne(ctx, checks[0].Key, checks[0].Limit, n)
	if err != nil {
		return nil, err
	}
	return []Result{res}, nil
}

// leaseOf returns the lease state of key, made if absent.
func (s *LeasingStore) leaseOf(key string) *lease {
	l, ok := s.leases.GetIfPresent(key)
	if !ok {
		l, _ = s.leases.ComputeIfAbsent(key, func() (*lease, bool) { return &lease{}, false })
	}
	return l
}

// innerOne asks the inner store for n units of one key.
func (s *LeasingStore) innerOne(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	res, err := s.inner.AllowAllN(ctx, []Check{{Key: key, Limit: limit}}, n)
	if err != nil {
		return Result{}, err
	}
	if len(res) != 1 {
		return Result{}, fmt.Errorf("%w: %d results for 1 check", ErrMalformedReply, len(res))
	}
	return res[0], nil
}
