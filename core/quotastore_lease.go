package core

import (
	"context"
	"fmt"
	"time"
)

// quota returns the inner store as a QuotaStore, or an error wrapping
// ErrNotSupported.
func (s *LeasingStore) quota() (QuotaStore, error) {
	q, ok := s.inner.(QuotaStore)
	if !ok {
		return nil, fmt.Errorf("%w: the inner store %T is not a QuotaStore", ErrNotSupported, s.inner)
	}
	return q, nil
}

// PeekAll implements [QuotaStore.PeekAll] through the inner store, which
// must be a QuotaStore (else an error wrapping [ErrNotSupported]). Units
// leased here and not yet spent count as remaining, as they do in the
// results of AllowAllN.
func (s *LeasingStore) PeekAll(ctx context.Context, checks []Check) ([]Result, error) {
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

// RefundAllN implements [QuotaStore.RefundAllN] through the inner store,
// which must be a QuotaStore (else an error wrapping [ErrNotSupported]):
// units always go back to the shared store, where every replica can spend
// them at once, never to a lease here, whose units would expire with it.
// Denials this store remembers of the keys are forgotten. The results
// count the units still leased here, as PeekAll's do.
func (s *LeasingStore) RefundAllN(ctx context.Context, checks []Check, n int) ([]Result, error) {
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
func (s *LeasingStore) forgetDenials(checks []Check) {
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
func (s *LeasingStore) withLeased(checks []Check, res []Result) ([]Result, error) {
	if len(res) != len(checks) {
		return nil, fmt.Errorf("%w: %d results for %d checks", ErrMalformedReply, len(res), len(checks))
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

// Reset implements [QuotaStore.Reset]: it drops this store's leases and
// remembered denials of the keys, then resets them in the inner store,
// which must be a QuotaStore (else an error wrapping [ErrNotSupported],
// after the leases are dropped).
func (s *LeasingStore) Reset(ctx context.Context, keys ...string) error {
	if err := validateKeys(keys); err != nil {
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
func (s *LeasingStore) drop(keys ...string) {
	for _, k := range keys {
		s.leases.Invalidate(k)
	}
}

// WatchResets implements [ResetWatcher] through the inner store, which must
// be a ResetWatcher (else an error wrapping [ErrNotSupported]): it also
// drops this store's lease of each key reset elsewhere, before calling fn.
func (s *LeasingStore) WatchResets(fn func(key string)) (stop func(), err error) {
	w, ok := s.inner.(ResetWatcher)
	if !ok {
		return nil, fmt.Errorf("%w: the inner store %T is not a ResetWatcher", ErrNotSupported, s.inner)
	}
	if fn == nil {
		return nil, fmt.Errorf("ratekit: WatchResets: nil func")
	}
	return w.WatchResets(func(key string) {
		s.drop(key)
		fn(key)
	})
}

// SetOverride implements [OverrideStore.SetOverride] through the inner
// store, which must be an OverrideStore (else an error wrapping
// [ErrNotSupported]), after dropping this store's lease and remembered
// denial of key: decisions of checks that name an override key pass
// through to the inner store, never leased.
func (s *LeasingStore) SetOverride(ctx context.Context, key, override string, limit Limit, ttl time.Duration) error {
	o, ok := s.inner.(OverrideStore)
	if !ok {
		return fmt.Errorf("%w: the inner store %T is not an OverrideStore", ErrNotSupported, s.inner)
	}
	if err := validateOverride(key, override, limit, ttl); err != nil {
		return err
	}
	s.drop(key)
	return o.SetOverride(ctx, key, override, limit, ttl)
}

// ClearOverride implements [OverrideStore.ClearOverride] through the inner
// store, as SetOverride does.
func (s *LeasingStore) ClearOverride(ctx context.Context, key, override string) error {
	o, ok := s.inner.(OverrideStore)
	if !ok {
		return fmt.Errorf("%w: the inner store %T is not an OverrideStore", ErrNotSupported, s.inner)
	}
	if err := validateOverrideKeys(key, override); err != nil {
		return err
	}
	s.drop(key)
	return o.ClearOverride(ctx, key, override)
}
