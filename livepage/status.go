package livepage

import (
	"context"
	"time"

	"github.com/ratekit/ratekit/core"
)

// Status is what GET status.json serves, and what the page draws.
type Status struct {
	// Generated is when the status was made (RFC 3339).
	Generated time.Time `json:"generated"`
	// Process names this process, as in the fleet.
	Process string `json:"process"`
	// ShowIdentities reports whether identities are shown as made, not
	// hashed.
	ShowIdentities bool `json:"show_identities"`
	// Peekable reports whether the page can look up an identity's quota:
	// it was given rules ([Source].Rules) to peek by.
	Peekable bool `json:"peekable"`
	// Writable reports whether the page takes writes with a token: it was
	// given one, and rules to write by.
	Writable bool            `json:"writable"`
	Limiters []LimiterStatus `json:"limiters"`
	Rules    []RuleStatus    `json:"rules"`
	// Tables are [Options].Tables'.
	Tables []Table `json:"tables,omitempty"`
}

// LimiterStatus is one Limiter's store health.
type LimiterStatus struct {
	Name          string `json:"name"`
	FailurePolicy string `json:"failure_policy"`
	Breaker       string `json:"breaker"`
	// BreakerOpenings counts the breaker's openings since the start.
	BreakerOpenings uint64 `json:"breaker_openings"`
	// StoreCalls and StoreErrors count the store calls since the start.
	StoreCalls  uint64 `json:"store_calls"`
	StoreErrors uint64 `json:"store_errors"`
	// Latency holds the store calls' percentiles over the last one to two
	// minutes, in milliseconds (each the top of a bucket about 19% wide).
	Latency map[string]float64 `json:"latency_ms"`
	// Degraded counts rule results decided without the store.
	Degraded uint64 `json:"degraded"`
	// Fleet lists the processes whose summaries the fleet view merges;
	// FleetError says why it could not be read.
	Fleet      []string `json:"fleet,omitempty"`
	FleetError string   `json:"fleet_error,omitempty"`
}

// RuleStatus is one rule's part of the status.
type RuleStatus struct {
	Limiter      string `json:"limiter"`
	Name         string `json:"name"`
	Limit        string `json:"limit"`
	Algorithm    string `json:"algorithm"`
	Capacity     int    `json:"capacity"`
	PeriodMS     int64  `json:"period_ms"`
	Shadow       bool   `json:"shadow"`
	Allowed      uint64 `json:"allowed"`
	Denied       uint64 `json:"denied"`
	ShadowDenied uint64 `json:"shadow_denied"`
	Degraded     uint64 `json:"degraded"`
	// Series holds decisions per second, oldest first.
	Series Series `json:"series"`
	// Offenders are this process's identities denied most over the
	// current and last window, most first; Near those allowed most often
	// within the near share of their limit.
	Offenders []Offender `json:"offenders"`
	Near      []Offender `json:"near"`
	// Fleet is the fleet's offenders, merged from every process's
	// publication; nil without a fleet.
	Fleet *FleetOffenders `json:"fleet,omitempty"`
}

// Series is a rule's decisions per second, one point a second, the last
// at End (unix ms).
type Series struct {
	End          int64    `json:"end"`
	Allowed      []uint32 `json:"allowed"`
	Denied       []uint32 `json:"denied"`
	ShadowDenied []uint32 `json:"shadow_denied"`
}

// Offender is one identity of a summary.
type Offender struct {
	Identity string `json:"identity"`
	// Denied is the count of the identity's denials (or near-limit
	// allowances, in Near): at most Error above the truth.
	Denied uint64 `json:"denied"`
	Error  uint64 `json:"error"`
}

// FleetOffenders is the fleet's view of a rule.
type FleetOffenders struct {
	Offenders []Offender `json:"offenders"`
	// Bound is n/k: no count is more than this above the truth, and
	// every identity denied more often is listed.
	Bound uint64 `json:"bound"`
}

// topShown is how many offenders of a rule the status lists.
const topShown = 20

// Status returns the page's data now.
func (h *Handler) Status(ctx context.Context) Status {
	st := Status{Generated: time.Now().UTC(), Process: h.sources[0].Recorder.opts.Process,
		ShowIdentities: h.opts.ShowIdentities, Limiters: []LimiterStatus{}, Rules: []RuleStatus{}}
	for _, src := range h.sources {
		st.Peekable = st.Peekable || src.Rules != nil
		st.Writable = st.Writable || h.opts.Token != "" && src.Rules != nil
	}
	if h.opts.Tables != nil {
		st.Tables = h.opts.Tables()
	}
	for _, src := range h.sources {
		rec := src.Recorder
		ls := LimiterStatus{Name: src.Name, FailurePolicy: src.Limiter.FailurePolicy().String(),
			Breaker:         core.BreakerState(rec.store.breaker.Load()).String(),
			BreakerOpenings: rec.store.openings.Load(), StoreCalls: rec.store.calls.Load(), StoreErrors: rec.store.errors.Load()}
		ps, _ := rec.store.latency.percentiles(0.5, 0.9, 0.99)
		ls.Latency = map[string]float64{"p50": ms(ps[0]), "p90": ms(ps[1]), "p99": ms(ps[2])}
		var fleet map[string]summary
		if rec.opts.Fleet != nil {
			var err error
			if fleet, ls.Fleet, err = rec.fleetView(ctx); err != nil {
				ls.FleetError = err.Error()
			}
		}
		seen := map[string]bool{}
		add := func(s *ruleStats, rule *core.Rule) {
			rs := h.ruleStatus(src, rec, s, rule)
			if f, ok := fleet[rs.Name]; ok || rec.opts.Fleet != nil {
				rs.Fleet = &FleetOffenders{Offenders: h.offenders(f), Bound: f.N / uint64(rec.opts.Counters)}
			}
			st.Rules = append(st.Rules, rs)
			ls.Degraded += rs.Degraded
		}
		stats := *rec.rules.Load()
		if src.Rules != nil {
			for _, rule := range src.Rules() {
				if !seen[rule.Name] {
					seen[rule.Name] = true
					add(stats[rule.Name], &rule)
				}
			}
		}
		for _, s := range rec.sortedRules() {
			if !seen[s.name] {
				seen[s.name] = true
				add(s, nil)
			}
		}
		st.Limiters = append(st.Limiters, ls)
	}
	return st
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ruleStatus returns one rule's status, from its stats (nil before its
// first decision) and its configuration (nil when not given).
func (h *Handler) ruleStatus(src Source, rec *Recorder, s *ruleStats, rule *core.Rule) RuleStatus {
	rs := RuleStatus{Limiter: src.Name, Offenders: []Offender{}, Near: []Offender{}}
	var limit core.Limit
	if rule != nil {
		rs.Name, rs.Shadow, limit = rule.Name, rule.Shadow, rule.Limit
	}
	if s != nil {
		rs.Name = s.name
		if l := s.limit.Load(); l != nil && (rule == nil || rule.LimitOf != nil || limit.Rate == 0) {
			limit = *l
		}
		rs.Shadow = rs.Shadow || s.shadow.Load()
		rs.Allowed, rs.Denied, rs.ShadowDenied, rs.Degraded = s.allowed.Load(), s.denied.Load(), s.shadowDen.Load(), s.degraded.Load()
		denied, near := rec.offenders(s)
		rs.Offenders, rs.Near = h.offenders(denied), h.offenders(near)
		rs.Series = s.snapshotSeries()
	} else {
		rs.Series = Series{End: time.Now().UnixMilli(), Allowed: []uint32{}, Denied: []uint32{}, ShadowDenied: []uint32{}}
	}
	if limit.Rate > 0 {
		rs.Limit, rs.Algorithm, rs.Capacity, rs.PeriodMS = limit.String(), limit.Algorithm.String(), limit.Capacity(), limit.Period.Milliseconds()
	}
	return rs
}

// offenders returns the first topShown identities of s as the page shows
// them.
func (h *Handler) offenders(s summary) []Offender {
	out := make([]Offender, 0, min(len(s.Counters), topShown))
	for _, c := range s.Counters[:min(len(s.Counters), topShown)] {
		out = append(out, Offender{Identity: h.show(c.id), Denied: c.hi, Error: c.hi - c.lo})
	}
	return out
}

// snapshotSeries returns the rule's series, oldest first.
func (s *ruleStats) snapshotSeries() Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Series{End: s.at.UnixMilli(), Allowed: make([]uint32, s.filled), Denied: make([]uint32, s.filled), ShadowDenied: make([]uint32, s.filled)}
	for i := range s.filled {
		p := s.series[(s.head-s.filled+i+seriesLen)%seriesLen]
		out.Allowed[i], out.Denied[i], out.ShadowDenied[i] = p[0], p[1], p[2]
	}
	return out
}
