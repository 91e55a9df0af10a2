// Package leasestore wraps a shared [core.Store] so that a hot key costs
// it one call per lease instead of one per decision, at the price of a
// bounded overshoot.
package leasestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// Store wraps a shared [core.Store] so that a hot key costs the shared
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
// lease size is [Store.Size]: by default 1/64 of the limit's
// capacity (at most 65,536), so that each replica overshoots by less than
// 1/64 of the limit, and a limit below 128 is not leased at all. Use it for
// keys so hot that the shared store's round trips are the cost that
// matters; leave it off where each unit must be exact.
//
// Calls of one check are leased, as a [core.Limiter] makes them for the rules of
// one identity alone in their group; calls of several checks, and of a
// check that names an override key ([core.Check.Override]), pass through. A Store is safe for concurrent use; Close it to
// release its cache.
type Store struct {
	inner   core.Store
	size    int // most units a lease takes; 0 for Size's default
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
	limit   core.Limit  // the limit of the units and denial below
	units   int         // leased units not yet spent
	expires time.Time   // units are void from then on
	last    core.Result // the shared store's answer that granted the units
	granted time.Time   // when it came
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

// Size returns the most units one lease takes under limit: the size
// set by [WithSize], capped by the limit's capacity, or by default
// capacity/64, at least 1 and at most 65,536. A size of 1 means every
// decision under limit goes to the shared store. Per window, replicas
// together admit at most limit + (Size − 1) × replicas.
func (s *Store) Size(limit core.Limit) int {
	if s.size > 0 {
		return min(s.size, limit.Capacity())
	}
	return min(max(1, limit.Capacity()/leaseShare), maxAutoLease)
}

// Option configures a [Store].
type Option func(*Store) error

// WithSize sets the most units one lease takes, whatever the limit, in
// place of the default of 1/64 of the limit's capacity (see
// [Store.Size]). A lease takes no more than the key's demand (its
// decisions in the current or the previous hold interval, whichever is
// more) and no more than the limit's capacity. n must be positive; 1
// leases nothing.
func WithSize(n int) Option {
	return func(s *Store) error {
		if n < 1 {
			return fmt.Errorf("ratekit: leasestore.WithSize(%d): want at least 1", n)
		}
		s.size = n
		return nil
	}
}

// WithHold sets how long leased units may be spent, 100ms by default; d
// must be positive. A key counts as hot when it saw at least two
// decisions in the current or the previous hold interval.
func WithHold(d time.Duration) Option {
	return func(s *Store) error {
		if d <= 0 {
			return fmt.Errorf("ratekit: leasestore.WithHold(%v): want a positive duration", d)
		}
		s.hold = d
		return nil
	}
}

// WithClock makes the store read time from now instead of [time.Now], for
// its leases' holds and demand: tests step time by hand with it.
func WithClock(now func() time.Time) Option {
	return func(s *Store) error {
		if now == nil {
			return errors.New("ratekit: leasestore.WithClock: nil clock")
		}
		s.now = now
		return nil
	}
}

// New returns a Store over inner, usually a redisstore.Store, configured
// by opts. It returns an error for a nil store and for a nil or invalid
// option.
func New(inner core.Store, opts ...Option) (*Store, error) {
	if inner == nil {
		return nil, errors.New("ratekit: leasestore.New: nil store")
	}
	s := &Store{inner: inner, hold: defaultLeaseHold, now: time.Now, maxKeys: 1 << 16}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("ratekit: leasestore.New: nil option")
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	s.leases = otter.Must(&otter.Options[string, *lease]{
		MaximumSize:      s.maxKeys,
		ExpiryCalculator: otter.ExpiryAccessing[string, *lease](10 * s.hold),
	})
	return s, nil
}

// defaultLeaseHold is how long leased units may be spent unless
// [WithHold] says otherwise.
const defaultLeaseHold = 100 * time.Millisecond

// Traits reports what the inner store promises: a lease spent locally
// keeps any deadline, and a call the inner store makes keeps what it
// promises.
func (s *Store) Traits() core.Traits {
	if r, ok := s.inner.(interface{ Traits() core.Traits }); ok {
		return r.Traits()
	}
	return core.Traits{}
}

// Close stops the lease cache's background clean-up. It does not close the
// inner store.
func (s *Store) Close() error {
	s.leases.StopAllGoroutines()
	return nil
}

// allowOne decides from the key's lease when it holds n units, and
// otherwise asks the inner store: for a lease when the key is hot, else for
// n units. The Result of a leased decision reports the shared store's
// remaining units plus those still leased here.
func (s *Store) allowOne(ctx context.Context, key string, limit core.Limit, n int) (core.Result, error) {
	if err := storecheck.Validate([]core.Check{{Key: key, Limit: limit}}, n); err != nil {
		return core.Result{}, err
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
		return core.Result{Limit: limit, RetryAfter: l.deniedUntil.Sub(now), ResetAfter: l.deniedUntil.Sub(now)}, nil
	}
	// a key is hot once it saw two decisions in this hold interval or the
	// previous one; it leases that demand, up to the lease size, so a key
	// that turns hot takes leases that double until they reach the size
	want := n
	if demand := max(l.prev, l.seen); demand >= 2 {
		want = min(max(n, min(s.Size(limit), demand)), limit.Capacity())
	}
	res, err := s.innerOne(ctx, key, limit, want)
	if err != nil {
		return core.Result{}, err
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
			return core.Result{}, err
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
func (l *lease) under(limit core.Limit) {
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
func (l *lease) result(now time.Time) core.Result {
	r := l.last
	r.Remaining = min(r.Remaining+l.units, r.Limit.Capacity())
	r.ResetAfter = max(0, r.ResetAfter-now.Sub(l.granted))
	return r
}

// AllowAllN decides one check from a lease when its key is hot, and passes
// several through to the inner store: several limits are decided together,
// never from leases. The Result of a leased decision reports the shared
// store's remaining units plus those still leased here. A [core.Limiter]
// calls it for every decision, so rules of one identity alone in their
// store call are leased through every middleware.
func (s *Store) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	if len(checks) != 1 || checks[0].Override != "" {
		return s.inner.AllowAllN(ctx, checks, n)
	}
	res, err := s.allowOne(ctx, checks[0].Key, checks[0].Limit, n)
	if err != nil {
		return nil, err
	}
	return []core.Result{res}, nil
}

// leaseOf returns the lease state of key, made if absent.
func (s *Store) leaseOf(key string) *lease {
	l, ok := s.leases.GetIfPresent(key)
	if !ok {
		l, _ = s.leases.ComputeIfAbsent(key, func() (*lease, bool) { return &lease{}, false })
	}
	return l
}

// innerOne asks the inner store for n units of one key.
func (s *Store) innerOne(ctx context.Context, key string, limit core.Limit, n int) (core.Result, error) {
	res, err := s.inner.AllowAllN(ctx, []core.Check{{Key: key, Limit: limit}}, n)
	if err != nil {
		return core.Result{}, err
	}
	if len(res) != 1 {
		return core.Result{}, fmt.Errorf("%w: %d results for 1 check", core.ErrMalformedReply, len(res))
	}
	return res[0], nil
}
