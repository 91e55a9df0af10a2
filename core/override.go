package core

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/internal/storekey"
)

// keysOf returns the storage key of identity under rule r, and the key of
// its override when r takes overrides, else "".
func (l *Limiter) keysOf(r *Rule, identity string) (key, override string, err error) {
	if !r.Overrides {
		slot := l.keys.slot(r.Name, identity)
		if key, ok := slot.get(l.prefix, r.Name, identity); ok {
			return key, "", nil
		}
		if key, err = l.storageKey(r.Name, identity); err == nil {
			slot.put(l.prefix, r.Name, identity, key)
		}
		return key, "", err
	}
	if err := storekey.ValidateName("rule name", r.Name, false); err != nil {
		return "", "", err
	}
	return storekey.KeyAndOverride(l.prefix, r.Name, identity)
}

// SetOverride makes limit the limit of identity under rule, in place of
// the rule's [Rule.Limit] or [Rule.LimitOf], for ttl (0: until
// [Limiter.ClearOverride]). The rule must take overrides
// ([Rule.Overrides]); limit's rate, period and burst are kept and the
// rule's algorithm enforces them (limit's Algorithm is replaced by the
// rule's), and the result must pass [Limit.Validate], or SetOverride
// returns an error wrapping [ErrInvalidLimit]. What identity already spent
// counts under the override, as under a changed limit.
//
// The override lives in the store: over package redisstore's store, every replica
// applies it from its next decision, read by the decision's own script
// call. Denials that this Limiter, and every Limiter that watches the
// store's resets (QuotaStore.WatchResets), remember of the key are forgotten, as
// by [Limiter.Reset]. While the store is unreachable, the local fallback
// knows no overrides: the identity gets the rule's limit. The call has the
// Limiter's deadline; it returns an error wrapping [ErrNotSupported] when
// the store is no [QuotaStore].
func (l *Limiter) SetOverride(ctx context.Context, rule Rule, identity string, limit Limit, ttl time.Duration) error {
	if err := validateRule(&rule); err != nil {
		return err
	}
	if !rule.Overrides {
		return fmt.Errorf("%w: rule %q does not take overrides (Rule.Overrides)", ErrInvalidLimit, rule.Name)
	}
	limit.Algorithm = rule.Limit.Algorithm
	if err := limit.Validate(); err != nil {
		return fmt.Errorf("ratekit: SetOverride: %w", err)
	}
	if ttl < 0 {
		return fmt.Errorf("%w: SetOverride: ttl %v (want 0 for none, or more)", ErrInvalidLimit, ttl)
	}
	return l.override(ctx, rule.Name, identity, func(ctx context.Context, os QuotaStore, k, o string) error {
		return os.SetOverride(ctx, k, o, limit, ttl)
	})
}

// ClearOverride removes identity's override under the named rule, if any:
// from its next decision on the rule's own limit applies. Remembered
// denials go as with [Limiter.SetOverride]. It returns an error wrapping
// [ErrNotSupported] when the store is no [QuotaStore].
func (l *Limiter) ClearOverride(ctx context.Context, rule, identity string) error {
	return l.override(ctx, rule, identity, func(ctx context.Context, os QuotaStore, k, o string) error {
		return os.ClearOverride(ctx, k, o)
	})
}

// override runs f, a change of the override of identity under rule, with
// the store, within the deadline, after forgetting what this Limiter
// remembers of the key.
func (l *Limiter) override(ctx context.Context, rule, identity string, f func(context.Context, QuotaStore, string, string) error) error {
	if err := storekey.ValidateName("rule name", rule, false); err != nil {
		return err
	}
	k, o, err := storekey.KeyAndOverride(l.prefix, rule, identity)
	if err != nil {
		return err
	}
	os, ok := l.store.(QuotaStore)
	if !ok {
		return fmt.Errorf("%w: overrides: %T is no QuotaStore", ErrNotSupported, l.store)
	}
	err = l.forgetAround(k, func() error {
		return l.quotaCall(ctx, func(ctx context.Context) error { return f(ctx, os, k, o) })
	})
	if err != nil {
		return fmt.Errorf("ratekit: override: %w", err)
	}
	return nil
}
