package localstore

import (
	"math"
	"sort"
	"time"
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
		if x := bound(c.ResetAfter); x >= 0 {
			s.refund(c, now, int64(n), x)
		}
	}
	s.peek(checks, now, results)
}

// bound returns a refund's bound in whole µs, rounded up, as
// storecheck.RefundBound sends it to refund.lua: 0 for none, -1 for a
// bound already past.
func bound(d time.Duration) int64 {
	switch {
	case d < 0:
		return -1
	case d == 0:
		return 0
	}
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// refundSlack is how far, in µs, a refund's bound may be off and still
// name the spend it bounds, as refund_slack.lua says: a quarter of period
// (µs), at least 2 ms.
func refundSlack(period int64) int64 { return max(period/4, 2000) }

// refund gives n units back to c's key, when its algorithm wrote it and it
// is live, as the <algorithm>_refund functions of the scripts do, within
// the bound x (µs; 0 for none).
func (s *Store) refund(c Check, now, n, x int64) {
	p, ok := s.cache.GetIfPresent(c.Key)
	if !ok || p.expires <= now || p.alg != c.Limit.Algorithm {
		return
	}
	period := c.Limit.Period.Microseconds()
	switch c.Limit.Algorithm {
	case GCRA:
		// the bound is not read, as gcra_refund reads none
		interval := int64(math.Ceil(float64(period) / float64(c.Limit.Rate)))
		tat := gcraTAT(*p, true, now, interval) - n*interval
		if tat <= now {
			s.cache.Invalidate(c.Key)
			return
		}
		s.store(c.Key, p, memState{alg: GCRA, a: tat, b: interval, expires: now + 1000*ceilMS(tat-now)})
	case FixedWindow:
		// as fixed_refund: a live count of this period's window drops by n,
		// the counter deleted at 0, unless the units were spent in an
		// earlier window than the one that ends where the counter expires
		ttl := p.expires/1000 - now/1000
		if ttl > period/1000 || p.b < 1 || p.b > maxRate {
			return
		}
		if x > 0 && (now/1000+ttl)*1000 > now+x+refundSlack(period) {
			return
		}
		if p.b <= n {
			s.cache.Invalidate(c.Key)
			return
		}
		p.b -= n
	case SlidingWindowCounter:
		w := int64(math.Floor(float64(now) / float64(period)))
		if x > 0 {
			// as slidingcounter_refund: to the window the units were
			// spent in, while it counts
			spent := int64(math.Floor(float64(now+x+refundSlack(period))/float64(period))) - 2
			switch {
			case spent == p.a && p.a >= w-1:
				p.b = max(0, p.b-n)
			case p.a == w && spent == w-1:
				p.c = max(0, p.c-n)
			}
			return
		}
		switch p.a {
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
		// the spent units are the newest n of log[lo:hi]
		lo, hi := 0, len(log)
		if x > 0 {
			// as slidinglog_refund: those of the instant nearest to when
			// the bound says they were admitted, if near enough
			est := now + x - period
			k := sort.Search(len(log), func(i int) bool { return log[i] > est })
			at, found := int64(0), false
			if k > 0 {
				at, found = log[k-1], true
			}
			if k < len(log) && (!found || log[k]-est < est-at) {
				at, found = log[k], true
			}
			if !found || max(at-est, est-at) > refundSlack(period) {
				lo, hi = 0, 0
			} else {
				lo = sort.Search(len(log), func(i int) bool { return log[i] >= at })
				hi = sort.Search(len(log), func(i int) bool { return log[i] > at })
			}
		}
		take := min(int64(hi-lo), n)
		if int64(len(log)) <= take || len(log) == 0 {
			s.cache.Invalidate(c.Key)
			return
		}
		p.log = append(log[:int64(hi)-take], log[hi:]...)
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
