package core

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/internal/storekey"
)

// OverrideStore is a [Store] that keeps per-identity overrides of limits:
// what [Limiter.SetOverride] and [Limiter.ClearOverride] need. A check
// whose [Check.Override] names an override the store holds is decided,
// peeked and refunded under the override's rate, period and burst, read
// within the same call (for [RedisStore], the same script call), and its
// Result's Limit is the limit applied. [RedisStore], [MemoryStore] and
// [LeasingStore] implement it; the conformance suite (package
// core/storetest) proves a store's overrides when it does.
type OverrideStore interface {
	Store
	// SetOverride stores limit's rate, period and burst as the override at
	// key override of the storage key key, for ttl (0: until cleared),
	// replacing any override there. A store shared between processes also
	// tells every process that watches it ([ResetWatcher]) of key, so that
	// a denial remembered under the old limit goes.
	SetOverride(ctx context.Context, key, override string, limit Limit, ttl time.Duration) error
	// ClearOverride removes the override at key override of the storage
	// key key, if any, and tells watchers of key as SetOverride does.
	ClearOverride(ctx context.Context, key, override string) error
}

// validateOverrideKey checks that override can name the override of key:
// not key itself, and in key's Redis Cluster hash slot.
func validateOverrideKey(key, override string) error {
	if override == key || hashTag(override) != hashTag(key) {
		return fmt.Errorf("%w: override key %q for storage key %q (want another key of its hash tag)", ErrInvalidIdentity, override, key)
	}
	return nil
}

// validateOverrideKeys checks the keys of an OverrideStore's call.
func validateOverrideKeys(key, override string) error {
	if key == "" || override == "" {
		return fmt.Errorf("%w: empty storage or override key", ErrInvalidIdentity)
	}
	return validateOverrideKey(key, override)
}

// validateOverride checks the arguments of an OverrideStore's SetOverride.
func validateOverride(key, override string, limit Limit, ttl time.Duration) error {
	if err := validateOverrideKeys(key, override); err != nil {
		return err
	}
	if ttl < 0 {
		return fmt.Errorf("%w: override ttl %v (want 0 for none, or more)", ErrInvalidLimit, ttl)
	}
	return limit.Validate()
}

// overrideTTL returns ttl in whole milliseconds, rounded up, as an
// override's key keeps it in Redis.
func overrideTTL(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// applied returns the limit of c under an override of rate, period and
// burst o: c's algorithm with o's parameters, and whether that limit can be
// enforced. One that cannot (a sliding log faster than [MaxLogRate]) is no
// override, as the scripts read it.
func applied(c *Check, o Limit) (Limit, bool) {
	l := Limit{Rate: o.Rate, Period: o.Period, Burst: o.Burst, Algorithm: c.Limit.Algorithm}
	return l, l.Validate() == nil
}

// hasOverride reports whether a check of checks names an override key.
func hasOverride(checks []Check) bool {
	for i := range checks {
		if checks[i].Override != "" {
			return true
		}
	}
	return false
}

// keysOf returns the storage key of identity under rule r, and the key of
// its override when r takes overrides, else "".
func (l *Limiter) keysOf(r *Rule, identity string) (key, override string, err error) {
	if !r.Overrides {
		key, err = l.StorageKey(r.Name, identity)
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
// The override lives in the store: over a [RedisStore], every replica
// applies it from its next decision, read by the decision's own script
// call. Denials that this Limiter, and every Limiter that watches the
// store's resets ([ResetWatcher]), remember of the key are forgotten, as
// by [Limiter.Reset]. While the store is unreachable, the local fallback
// knows no overrides: the identity gets the rule's limit. The call has the
// Limiter's deadline; it returns an error wrapping [ErrNotSupported] when
// the store is no [OverrideStore].
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
	return l.override(ctx, rule.Name, identity, func(ctx context.Context, os OverrideStore, k, o string) error {
		return os.SetOverride(ctx, k, o, limit, ttl)
	})
}

// ClearOverride removes identity's override under the named rule, if any:
// from its next decision on the rule's own limit applies. Remembered
// denials go as with [Limiter.SetOverride]. It returns an error wrapping
// [ErrNotSupported] when the store is no [OverrideStore].
func (l *Limiter) ClearOverride(ctx context.Context, rule, identity string) error {
	return l.override(ctx, rule, identity, func(ctx context.Context, os OverrideStore, k, o string) error {
		return os.ClearOverride(ctx, k, o)
	})
}

// override runs f, a change of the override of identity under rule, with
// the store, within the deadline, after forgetting what this Limiter
// remembers of the key.
func (l *Limiter) override(ctx context.Context, rule, identity string, f func(context.Context, OverrideStore, string, string) error) error {
	if err := storekey.ValidateName("rule name", rule, false); err != nil {
		return err
	}
	k, o, err := storekey.KeyAndOverride(l.prefix, rule, identity)
	if err != nil {
		return err
	}
	os, ok := l.store.(OverrideStore)
	if !ok {
		return fmt.Errorf("%w: overrides: %T is no OverrideStore", ErrNotSupported, l.store)
	}
	l.forget(k)
	if err := l.quotaCall(ctx, func(ctx context.Context) error { return f(ctx, os, k, o) }); err != nil {
		return fmt.Errorf("ratekit: override: %w", err)
	}
	return nil
}
