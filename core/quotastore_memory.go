package core

import (
	"context"
	"math"
)

// PeekAll implements [QuotaStore.PeekAll], as peek.lua reads the keys.
func (s *MemoryStore) PeekAll(ctx context.Context, checks []Check) ([]Result, error) {
	if err := validate(checks, 1); err != nil {
		return nil, err
	}
	checks = s.withOverrides(checks)
	defer s.lockMany(checks)()
	return s.peek(checks, s.now().UnixMicro()), nil
}

// peek reads every check's key at now as a request of one unit would,
// writing only a sliding log's trim. The caller holds the keys' locks.
func (s *MemoryStore) peek(checks []Check, now int64) []Result {
	results := make([]Result, len(checks))
	for i, c := range checks {
		st, ok, p := s.read(c, now)
		d := decide(c.Limit, st, ok, now, 1)
		d.trim.alg = c.Limit.Algorithm
		s.storeTrim(c.Key, p, &d)
		if d.ok {
			results[i] = result(c.Limit, true, d.remaining, 0, d.reset)
		} else {
			results[i] = result(c.Limit, false, d.remaining, d.retry, d.reset)
		}
	}
	return results
}

// RefundAllN implements [QuotaStore.RefundAllN], as refund.lua gives the
// units back, and answers as PeekAll after it.
func (s *MemoryStore) RefundAllN(ctx context.Context, checks []Check, n int) ([]Result, error) {
	if err := validate(checks, n); err != nil {
		return nil, err
	}
	checks = s.withOverrides(checks)
	defer s.lockMany(checks)()
	now := s.now().UnixMicro()
	for _, c := range checks {
		s.refund(c, now, int64(n))
	}
	return s.peek(checks, now), nil
}

// refund gives n units back to c's key, when its algorithm wrote it and it
// is live, as the <algorithm>_refund functions of the scripts do.
func (s *MemoryStore) refund(c Check, now, n int64) {
	p, ok := s.cache.GetIfPresent(c.Key)
	if !ok || p.expires <= now || p.alg != c.Limit.Algorithm {
		return
	}
	period := c.Limit.Period.Microseconds()
	switch c.Limit.Algorithm {
	case GCRA:
		interval := int64(math.Ceil(float64(period) / float64(c.Limit.Rate)))
		tat := gcraTAT(*p, true, now, interval) - n*interval
		if tat <= now {
			s.cache.Invalidate(c.Key)
			return
		}
		s.store(c.Key, p, memState{alg: GCRA, a: tat, b: interval, expires: now + 1000*ceilMS(tat-now)})
	case FixedWindow:
		// as fixed_refund: a live count of this period's window drops by n,
		// the counter deleted at 0
		if ttl := p.expires/1000 - now/1000; ttl > period/1000 || p.b < 1 || p.b > MaxRate {
			return
		}
		if p.b <= n {
			s.cache.Invalidate(c.Key)
			return
		}
		p.b -= n
	case SlidingWindowCounter:
		switch w := int64(math.Floor(float64(now) / float64(period))); p.a {
		case w:
			back := min(p.b, n)
			p.b, p.c = p.b-back, max(0, p.c-(n-back))
		case w - 1:
			p.b = max(0, p.b-n)
		}
	case SlidingWindowLog:
		log := p.log
		for len(log) > 0 && log[0] <= now-period {
			log = log[1:]
		}
		if int64(len(log)) <= n {
			s.cache.Invalidate(c.Key)
			return
		}
		p.log = log[:int64(len(log))-n]
	}
}

// Reset implements [QuotaStore.Reset]: the keys' state is dropped.
func (s *MemoryStore) Reset(ctx context.Context, keys ...string) error {
	if err := validateKeys(keys); err != nil {
		return err
	}
	for _, k := range keys {
		m := &s.locks[s.stripe(k)]
		m.Lock()
		s.cache.Invalidate(k)
		m.Unlock()
	}
	return nil
}
