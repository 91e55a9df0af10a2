package localstore

import (
	"math"
)

// Peek reports into results what each check's key would answer a request
// of one unit now, without spending anything, as peek.lua reads the keys:
// only a sliding log's trim is written.
func (s *Store) Peek(checks []Check, results []Result) {
	defer s.lockMany(checks)()
	s.peek(checks, s.now().UnixMicro(), results)
}

// peek reads every check's key at now into results. The caller holds the
// keys' locks.
func (s *Store) peek(checks []Check, now int64, results []Result) {
	for i, c := range checks {
		st, ok, p := s.read(c, now)
		d := decide(c.Limit, st, ok, now, 1)
		d.trim.alg = c.Limit.Algorithm
		s.storeTrim(c.Key, p, &d)
		if d.ok {
			results[i] = result(true, d.remaining, 0, d.reset)
		} else {
			results[i] = result(false, d.remaining, d.retry, d.reset)
		}
	}
}

// Refund gives n units back to each check's key, as refund.lua does, and
// reports into results what Peek would answer after it.
func (s *Store) Refund(checks []Check, n int, results []Result) {
	defer s.lockMany(checks)()
	now := s.now().UnixMicro()
	for _, c := range checks {
		s.refund(c, now, int64(n))
	}
	s.peek(checks, now, results)
}

// refund gives n units back to c's key, when its algorithm wrote it and it
// is live, as the <algorithm>_refund functions of the scripts do.
func (s *Store) refund(c Check, now, n int64) {
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
		if ttl := p.expires/1000 - now/1000; ttl > period/1000 || p.b < 1 || p.b > maxRate {
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

// Reset drops the keys' state.
func (s *Store) Reset(keys ...string) {
	for _, k := range keys {
		m := &s.locks[s.stripe(k)]
		m.Lock()
		s.cache.Invalidate(k)
		m.Unlock()
	}
}
