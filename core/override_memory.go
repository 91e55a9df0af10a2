package core

import (
	"context"
	"sync"
	"time"
)

// memOverrides holds a MemoryStore's overrides by override key, each with
// its expiry, as Redis keeps them in keys with a TTL.
type memOverrides struct {
	mu      sync.Mutex
	m       map[string]memOverride
	sweepAt int // size at which SetOverride next drops expired overrides
}

type memOverride struct {
	limit   Limit // rate, period and burst; the algorithm is the check's
	expires int64 // µs of the store's clock; 0 for never
}

// SetOverride implements [OverrideStore.SetOverride].
func (s *MemoryStore) SetOverride(ctx context.Context, key, override string, limit Limit, ttl time.Duration) error {
	if err := validateOverride(key, override, limit, ttl); err != nil {
		return err
	}
	now := s.now().UnixMicro()
	o := memOverride{limit: Limit{Rate: limit.Rate, Period: limit.Period, Burst: limit.Burst}}
	if ttl > 0 {
		// Redis keeps a TTL in whole milliseconds: PX rounds up
		o.expires = now + 1000*overrideTTL(ttl)
	}
	ov := &s.overrides
	ov.mu.Lock()
	defer ov.mu.Unlock()
	if ov.m == nil {
		ov.m = make(map[string]memOverride)
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
	return nil
}

// ClearOverride implements [OverrideStore.ClearOverride].
func (s *MemoryStore) ClearOverride(ctx context.Context, key, override string) error {
	if err := validateOverrideKeys(key, override); err != nil {
		return err
	}
	s.overrides.mu.Lock()
	delete(s.overrides.m, override)
	s.overrides.mu.Unlock()
	return nil
}

// withOverrides returns checks with each live override applied to its
// check's limit, as override.lua applies them: checks itself when no check
// names an override, else a copy, with Override cleared.
func (s *MemoryStore) withOverrides(checks []Check) []Check {
	if !hasOverride(checks) {
		return checks
	}
	now := s.now().UnixMicro()
	out := make([]Check, len(checks))
	ov := &s.overrides
	ov.mu.Lock()
	defer ov.mu.Unlock()
	for i := range checks {
		out[i] = Check{Key: checks[i].Key, Limit: checks[i].Limit}
		o, ok := ov.m[checks[i].Override]
		if !ok || checks[i].Override == "" || o.expires != 0 && o.expires <= now {
			continue
		}
		if l, ok := applied(&checks[i], o.limit); ok {
			out[i].Limit = l
		}
	}
	return out
}
