// Package memorystore is an in-process [core.Store]: the same algorithms
// as package redisstore's scripts, giving the same answers for the same
// sequence of calls and clock, shared only by the goroutines of one
// process. It serves tests, single replicas, and anything that must not
// depend on a network.
package memorystore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/localstore"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// Store keeps limits in this process's memory. It implements
// [core.QuotaStore] (peek, refund, reset and overrides) and states that it
// decides in process, so a [core.Limiter] calls it directly, with no
// deadline, breaker or fallback.
//
// Its memory is bounded: a key's state is ignored once it has expired (when
// Redis would have expired it) and dropped within about a second after, and
// at most [WithMaxKeys] keys are kept. Keys used again within that second
// are updated in place, without allocating. It is safe for concurrent use;
// call [Store.Close] to stop its background clean-up.
type Store struct {
	now    func() time.Time
	engine *localstore.Store
	// overrides holds the overrides set by SetOverride
	overrides overrides
	resets    watchers
}

// Option configures a [Store].
type Option func(*config) error

type config struct {
	now     func() time.Time
	maxKeys int
}

// WithClock makes the store read time from now instead of [time.Now]:
// tests step time by hand with it.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("ratekit: memorystore.WithClock: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithMaxKeys bounds how many keys the store keeps, 1<<20 by default; n
// must be positive. When a new key would exceed it, the least recently
// used keys are dropped first: their identities start afresh, so the bound
// trades exactness for memory only under a flood of distinct identities.
func WithMaxKeys(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("ratekit: memorystore.WithMaxKeys(%d): want at least 1", n)
		}
		c.maxKeys = n
		return nil
	}
}

// New returns an empty Store, configured by opts. It returns an error for
// a nil or invalid option.
func New(opts ...Option) (*Store, error) {
	cfg := config{now: time.Now}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("ratekit: memorystore.New: nil option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	return &Store{now: cfg.now, engine: localstore.New(cfg.now, cfg.maxKeys)}, nil
}

// Traits reports that the store decides in process: a [core.Limiter]
// calls it directly, with no deadline, breaker or fallback.
func (s *Store) Traits() core.Traits { return core.Traits{InProcess: true} }

// Close releases the store's background resources. The store keeps working
// after Close, without proactive clean-up: expired state is still ignored,
// and dropped when it is next written or evicted.
func (s *Store) Close() error {
	s.engine.Close()
	return nil
}

// Len returns how many keys the store holds, expired ones included until
// they are cleaned up.
func (s *Store) Len() int { return s.engine.Len() }

// AllowAllN implements [core.Store.AllowAllN].
func (s *Store) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	results := make([]core.Result, len(checks))
	if err := s.AllowInto(ctx, checks, n, results); err != nil {
		return nil, err
	}
	return results, nil
}

// AllowInto is [Store.AllowAllN] deciding into results, one per check,
// rather than into a slice it allocates: a [core.Limiter] calls it so.
func (s *Store) AllowInto(_ context.Context, checks []core.Check, n int, results []core.Result) error {
	if err := storecheck.Validate(checks, n); err != nil {
		return err
	}
	if len(results) != len(checks) {
		return fmt.Errorf("%w: %d results for %d checks", core.ErrMalformedReply, len(results), len(checks))
	}
	var (
		cbuf [4]localstore.Check
		rbuf [4]localstore.Result
	)
	local, out := s.local(checks, cbuf[:0]), rbuf[:0]
	if len(checks) > len(rbuf) {
		out = make([]localstore.Result, len(checks))
	}
	out = out[:len(checks)]
	s.engine.Allow(local, n, out)
	s.results(checks, local, out, results)
	return nil
}

// PeekAll implements [core.QuotaStore.PeekAll], as redisstore's peek
// script reads the keys.
func (s *Store) PeekAll(ctx context.Context, checks []core.Check) ([]core.Result, error) {
	if err := storecheck.Validate(checks, 1); err != nil {
		return nil, err
	}
	local := s.local(checks, nil)
	out := make([]localstore.Result, len(checks))
	s.engine.Peek(local, out)
	results := make([]core.Result, len(checks))
	s.results(checks, local, out, results)
	return results, nil
}

// RefundAllN implements [core.QuotaStore.RefundAllN], as redisstore's
// refund script gives the units back, and answers as PeekAll after it.
func (s *Store) RefundAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	if err := storecheck.Validate(checks, n); err != nil {
		return nil, err
	}
	local := s.local(checks, nil)
	out := make([]localstore.Result, len(checks))
	s.engine.Refund(local, n, out)
	results := make([]core.Result, len(checks))
	s.results(checks, local, out, results)
	return results, nil
}

// Reset implements [core.QuotaStore.Reset]: the keys' state is dropped,
// and the store's reset watchers are told of each key.
func (s *Store) Reset(ctx context.Context, keys ...string) error {
	if err := storecheck.ValidateKeys(keys); err != nil {
		return err
	}
	s.engine.Reset(keys...)
	for _, k := range keys {
		s.resets.tell(k)
	}
	return nil
}

// WatchResets implements [core.QuotaStore.WatchResets]. The store is
// shared by one process only, so fn hears of the resets and overrides made
// through this store.
func (s *Store) WatchResets(fn func(key string)) (stop func(), err error) {
	if fn == nil {
		return nil, errors.New("ratekit: memorystore: WatchResets: nil function")
	}
	return s.resets.add(fn), nil
}

// local returns checks for the engine, appended to buf, with each live
// override applied to its check's limit.
func (s *Store) local(checks []core.Check, buf []localstore.Check) []localstore.Check {
	if !storecheck.HasOverride(checks) {
		for _, c := range checks {
			buf = append(buf, localstore.Check{Key: c.Key, Limit: localLimit(c.Limit), ResetAfter: c.ResetAfter})
		}
		return buf
	}
	now := s.now().UnixMicro()
	for i := range checks {
		lim := checks[i].Limit
		if o, ok := s.overrides.get(checks[i].Override, now); ok {
			if l, ok := storecheck.Applied(&checks[i], o); ok {
				lim = l
			}
		}
		buf = append(buf, localstore.Check{Key: checks[i].Key, Limit: localLimit(lim), ResetAfter: checks[i].ResetAfter})
	}
	return buf
}

// results writes the engine's answers for local, made of checks, into
// results: each Result's Limit is the limit applied.
func (s *Store) results(checks []core.Check, local []localstore.Check, out []localstore.Result, results []core.Result) {
	for i := range out {
		lim := checks[i].Limit
		if l := local[i].Limit; l != localLimit(lim) {
			lim = core.Limit{Rate: l.Rate, Period: l.Period, Burst: l.Burst, Algorithm: lim.Algorithm}
		}
		r := out[i]
		results[i] = core.Result{Limit: lim, Allowed: r.Allowed, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
	}
}

// localLimit is l in the engine's terms.
func localLimit(l core.Limit) localstore.Limit {
	return localstore.Limit{Rate: l.Rate, Period: l.Period, Burst: l.Burst, Algorithm: localstore.Algorithm(l.Algorithm)}
}
