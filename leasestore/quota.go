package leasestore

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// quota returns the inner store as a QuotaStore, or an error wrapping
// ErrNotSupported.
func (s *Store) quota() (core.QuotaStore, error) {
	q, ok := s.inner.(core.QuotaStore)
	if !ok {
		return nil, fmt.Errorf("%w: the inner store %T is not a QuotaStore", core.ErrNotSupported, s.inner)
	}
	return q, nil
}

// PeekAll implements [core.QuotaStore.PeekAll] through the inner store, which
// must be a QuotaStore (else an error wrapping [core.ErrNotSupported]). Units
// leased here and not yet spent count as remaining, as they do in the
// results of AllowAllN.
func (s *Store) PeekAll(ctx context.Context, checks []core.Check) ([]core.Result, error) {
	q, err := s.quota()
	if err != nil {
		return nil, err
	}
	res, err := q.PeekAll(ctx, checks)
	if err != nil {
		return nil, err
	}
	return s.withLeased(checks, res)
}

// RefundAllN implements [core.QuotaStore.RefundAllN] through the inner store,
// which must be a QuotaStore (else an error wrapping [core.ErrNotSupported]):
// units always go back to the shared store, where every replica can spend
// them at once, never to a lease here, whose units would expire with it.
// Denials this store remembers of the keys are forgotten. The results
// count the units still leased here, as PeekAll's do.
func (s *Store) RefundAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	q, err := s.quota()
	if err != nil {
		return nil, err
	}
	res, err := q.RefundAllN(ctx, checks, n)
	if err != nil {
		return nil, err
	}
	s.forgetDenials(checks)
	return s.withLeased(checks, res)
}

// forgetDenials drops the denials remembered of the checks' keys, which a
// refund makes stale. It waits for a decision of the key in progress.
func (s *Store) forgetDenials(checks []core.Check) {
	for _, c := range checks {
		if l, ok := s.leases.GetIfPresent(c.Key); ok {
			l.mu.Lock()
			l.deniedUntil, l.deniedCost = time.Time{}, 0
			l.mu.Unlock()
		}
	}
}

// withLeased adds to each result the units of its key's live lease, under
// the check's limit.
func (s *Store) withLeased(checks []core.Check, res []core.Result) ([]core.Result, error) {
	if len(res) != len(checks) {
		return nil, fmt.Errorf("%w: %d results for %d checks", core.ErrMalformedReply, len(res), len(checks))
	}
	for i, c := range checks {
		l, ok := s.leases.GetIfPresent(c.Key)
		if !ok || c.Override != "" {
			continue // an override check is never leased
		}
		l.mu.Lock()
		units := 0
		if l.limit == c.Limit && s.now().Before(l.expires) {
			units = l.units
		}
		l.mu.Unlock()
		if units > 0 {
			r := &res[i]
			r.Remaining = min(r.Remaining+units, c.Limit.Capacity())
			r.Allowed, r.RetryAfter = true, 0
		}
	}
	return res, nil
}

// Reset implements [core.QuotaStore.Reset]: it drops this store's leases and
// remembered denials of the keys, then resets them in the inner store,
// which must be a QuotaStore (else an error wrapping [core.ErrNotSupported],
// after the leases are dropped).
func (s *Store) Reset(ctx context.Context, keys ...string) error {
	if err := storecheck.ValidateKeys(keys); err != nil {
		return err
	}
	s.drop(keys...)
	q, err := s.quota()
	if err != nil {
		return err
	}
	return q.Reset(ctx, keys...)
}

// drop forgets the leases of keys. A decision holding a lease's lock
// finishes on the lease it holds; the next one starts afresh.
func (s *Store) drop(keys ...string) {
	for _, k := range keys {
		s.leases.Invalidate(k)
	}
}

// WatchResets implements [core.QuotaStore] through the inner store, which must
// be a QuotaStore (else an error wrapping [core.ErrNotSupported]): it also
// drops this store's lease of each key reset elsewhere, before calling fn,
// and every lease for the empty key (resets may have gone unheard).
func (s *Store) WatchResets(fn func(key string)) (stop func(), err error) {
	w, err := s.quota()
	if err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("ratekit: WatchResets: nil func")
	}
	return w.WatchResets(func(key string) {
		if key == "" {
			s.leases.InvalidateAll()
		} else {
			s.drop(key)
		}
		fn(key)
	})
}

// SetOverride implements [core.QuotaStore.SetOverride] through the inner
// store, which must be a QuotaStore (else an error wrapping
// [core.ErrNotSupported]), after dropping this store's lease and remembered
// denial of key: decisions of checks that name an override key pass
// through to the inner store, never leased.
func (s *Store) SetOverride(ctx context.Context, key, override string, limit core.Limit, ttl time.Duration) error {
	o, err := s.quota()
	if err != nil {
		return err
	}
	if err := storecheck.ValidateOverride(key, override, limit, ttl); err != nil {
		return err
	}
	s.drop(key)
	return o.SetOverride(ctx, key, override, limit, ttl)
}

// ClearOverride implements [core.QuotaStore.ClearOverride] through the inner
// store, as SetOverride does.
func (s *Store) ClearOverride(ctx context.Context, key, override string) error {
	o, err := s.quota()
	if err != nil {
		return err
	}
	if err := storecheck.ValidateOverrideKeys(key, override); err != nil {
		return err
	}
	s.drop(key)
	return o.ClearOverride(ctx, key, override)
}
