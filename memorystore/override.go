package memorystore

import (
	"context"
	"sync"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// overrides holds a Store's overrides by override key, each with its
// expiry, as Redis keeps them in keys with a TTL.
type overrides struct {
	mu      sync.Mutex
	m       map[string]overrideValue
	sweepAt int // size at which SetOverride next drops expired overrides
}

type overrideValue struct {
	limit   core.Limit // rate, period and burst; the algorithm is the check's
	expires int64      // µs of the store's clock; 0 for never
}

// get returns the override at key, live at now.
func (ov *overrides) get(key string, now int64) (core.Limit, bool) {
	if key == "" {
		return core.Limit{}, false
	}
	ov.mu.Lock()
	defer ov.mu.Unlock()
	o, ok := ov.m[key]
	if !ok || o.expires != 0 && o.expires <= now {
		return core.Limit{}, false
	}
	return o.limit, true
}

// SetOverride implements [core.QuotaStore.SetOverride], and tells the
// store's reset watchers of key.
func (s *Store) SetOverride(ctx context.Context, key, override string, limit core.Limit, ttl time.Duration) error {
	if err := storecheck.ValidateOverride(key, override, limit, ttl); err != nil {
		return err
	}
	now := s.now().UnixMicro()
	o := overrideOf(limit, ttl, now)
	ov := &s.overrides
	ov.mu.Lock()
	if ov.m == nil {
		ov.m = make(map[string]overrideValue)
	}
	ov.m[override] = o
	if len(ov.m) >= ov.sweepAt {
		for k, v := range ov.m {
			if v.expires != 0 && v.expires <= now {
				delete(ov.m, k)
			}
		}
		ov.sweepAt = max(1024, 2*len(ov.m))
	}
	ov.mu.Unlock()
	s.resets.tell(key)
	return nil
}

// ClearOverride implements [core.QuotaStore.ClearOverride], and tells the
// store's reset watchers of key.
func (s *Store) ClearOverride(ctx context.Context, key, override string) error {
	if err := storecheck.ValidateOverrideKeys(key, override); err != nil {
		return err
	}
	s.overrides.mu.Lock()
	delete(s.overrides.m, override)
	s.overrides.mu.Unlock()
	s.resets.tell(key)
	return nil
}

// overrideOf is the override of limit for ttl from now: Redis keeps a TTL
// in whole milliseconds, PX rounding up.
func overrideOf(limit core.Limit, ttl time.Duration, now int64) overrideValue {
	o := overrideValue{limit: core.Limit{Rate: limit.Rate, Period: limit.Period, Burst: limit.Burst}}
	if ttl > 0 {
		o.expires = now + 1000*storecheck.OverrideTTL(ttl)
	}
	return o
}
