package localstore

import "math"

// Charge spends n units from each check's key whatever it holds, as
// charge.lua does, each key on its own and within its debt bound (see
// core.MaxDebtPeriods: debt periods d), writes into charged the units each
// key took, and reports into results what Peek would answer after it. n
// is at least 1; the caller has validated checks.
func (s *Store) Charge(checks []Check, n, d int64, charged []int64, results []Result) {
	defer s.lockMany(checks)()
	now := s.now().UnixMicro()
	for i, c := range checks {
		charged[i] = s.charge(c, now, n, d)
	}
	s.peek(checks, now, results)
}

// charge spends up to n units from c's key at now, as the <algorithm>_charge
// functions of the scripts do, and returns how many it spent.
func (s *Store) charge(c Check, now, n, d int64) int64 {
	st, ok, p := s.read(c, now)
	rate := int64(c.Limit.Rate)
	period := c.Limit.Period.Microseconds()
	switch c.Limit.Algorithm {
	case FixedWindow:
		// as fixed_charge: the count of the window, past the rate, never
		// past rate × (d + 1) nor what a count may hold
		pm := period / 1000
		nowMS := now / 1000
		count, expires := int64(0), 1000*(nowMS-nowMS%pm+pm)
		if ttl := st.expires/1000 - nowMS; ok && ttl > 0 && ttl <= pm && st.b >= 0 && st.b <= maxRate {
			count, expires = st.b, st.expires
		}
		add := min(n, max(0, min(rate*(d+1), maxRate)-count))
		if add > 0 {
			s.store(c.Key, p, memState{alg: FixedWindow, b: count + add, expires: expires})
		}
		return add
	case SlidingWindowLog:
		// as slidinglog_charge: members past the rate, at most one rate of
		// them, since every member leaves within a period
		dec := decideLog(rate, period, st, now, 0)
		have := int64(len(dec.trim.log))
		add := min(n, max(0, 2*rate-have))
		if add == 0 {
			dec.trim.alg = SlidingWindowLog
			s.storeTrim(c.Key, p, &dec)
			return 0
		}
		grown := dec.trim.log
		for range add {
			grown = append(grown, now)
		}
		s.store(c.Key, p, memState{alg: SlidingWindowLog, log: grown, expires: now + 1000*(ceilMS(period)+1)})
		return add
	case SlidingWindowCounter:
		// as slidingcounter_charge: the current window's count, past the
		// rate, never past rate × (d + 1)
		w := int64(math.Floor(float64(now) / float64(period)))
		var cur, prev int64
		if ok && st.a == w {
			cur, prev = st.b, st.c
		} else if ok && st.a == w-1 {
			prev = st.b
		}
		add := min(n, max(0, rate*(d+1)-cur))
		if add > 0 {
			start := w * period
			s.store(c.Key, p, memState{alg: SlidingWindowCounter, a: w, b: cur + add, c: prev,
				expires: now + 1000*(ceilMS(start+2*period-now)+1)})
		}
		return add
	default:
		// as gcra_charge: the TAT moves n intervals on, never past
		// now + (burst + d × rate) intervals
		interval := int64(math.Ceil(float64(period) / float64(rate)))
		tat := gcraTAT(st, ok, now, interval)
		limit := now + (int64(c.Limit.Burst)+d*rate)*interval
		add := min(n, max(0, (limit-tat)/interval))
		if add > 0 {
			tat += add * interval
			s.store(c.Key, p, memState{alg: GCRA, a: tat, b: interval, expires: now + 1000*ceilMS(tat-now)})
		}
		return add
	}
}
