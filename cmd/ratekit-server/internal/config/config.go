// Package config reads envoyproxy/ratelimit's YAML files, with envoy's keys
// and meaning, plus the keys ratekit adds, and matches request descriptors
// against them as envoy does.
//
// A file holds one domain and its descriptors:
//
//	domain: <unique domain>
//	descriptors:
//	  - key: <key, required>
//	    value: <value; each * matches any run of characters, even none>
//	    rate_limit:
//	      unit: second | minute | hour | day | week | month | year
//	      requests_per_unit: <uint32>
//	      unlimited: <bool>
//	      name: <name, for replaces>
//	      replaces: [{name: <name>}]
//	      # ratekit's own keys, which envoy's files never hold:
//	      algorithm: gcra | fixed | sliding-log | sliding-counter
//	      burst: <int, gcra>
//	      unit_multiplier: <int: the window is that many units>
//	      period: <Go duration, instead of unit>
//	    limits: [<more rate_limit blocks, decided all or nothing with it>]  # ratekit
//	    shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold: <bool>
//	    metadata: <any mapping, returned in the dynamic metadata of answers>
//	    descriptors: [<nested descriptors>]
//
// Without ratekit's algorithm key (and RATEKIT_ALGORITHM unset) a limit is
// counted as envoy counts it: a fixed window aligned to the calendar, every
// hit counted, over the limit or not.
package config

import (
	"fmt"
	"sort"
	"strings"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratekit/ratekit/core"
)

// Unit is the unit of a limit, as envoy's API names it.
type Unit = rlspb.RateLimitResponse_RateLimit_Unit

// Algorithm is how a limit is counted.
type Algorithm uint8

const (
	// Compatible counts as envoyproxy/ratelimit does: a fixed window
	// aligned to the calendar (Unix time divided by the window), every hit
	// added to the count, over the limit or not.
	Compatible Algorithm = iota
	GCRA
	Fixed
	SlidingLog
	SlidingCounter
)

// ParseAlgorithm returns the algorithm named s: "compatible" (or
// "envoy"), or one of ratekit's: "gcra", "fixed", "sliding-log",
// "sliding-counter".
func ParseAlgorithm(s string) (Algorithm, error) {
	switch strings.ToLower(s) {
	case "compatible", "envoy":
		return Compatible, nil
	}
	a, err := core.ParseAlgorithm(s)
	if err != nil {
		return 0, fmt.Errorf("unknown algorithm %q (want compatible, gcra, fixed, sliding-log or sliding-counter)", s)
	}
	return fromCore(a), nil
}

func fromCore(a core.Algorithm) Algorithm {
	switch a {
	case core.GCRA:
		return GCRA
	case core.FixedWindow:
		return Fixed
	case core.SlidingWindowLog:
		return SlidingLog
	default:
		return SlidingCounter
	}
}

// Core returns the library's algorithm; Compatible has none.
func (a Algorithm) Core() core.Algorithm {
	switch a {
	case GCRA:
		return core.GCRA
	case Fixed:
		return core.FixedWindow
	case SlidingLog:
		return core.SlidingWindowLog
	default:
		return core.SlidingWindowCounter
	}
}

func (a Algorithm) String() string {
	if a == Compatible {
		return "compatible"
	}
	return a.Core().String()
}

// Limit is one limit of a descriptor.
type Limit struct {
	// Name is rate_limit's name: what replaces names, and current_limit's
	// name in answers.
	Name            string
	RequestsPerUnit uint32
	// Unit is the unit answers report. With ratekit's period it is the
	// longest unit that fits in the period.
	Unit Unit
	// Period is the window: Unit's length times unit_multiplier, or
	// ratekit's period.
	Period    time.Duration
	Algorithm Algorithm
	// Burst is the GCRA bucket's size (requests_per_unit unless set).
	Burst int
	// Proto is current_limit in answers: Name, RequestsPerUnit and Unit,
	// built once and shared, read-only, by every answer.
	Proto *rlspb.RateLimitResponse_RateLimit
}

// Core returns the library's limit for l; l must not be Compatible with
// RequestsPerUnit 0, which no library limit expresses.
func (l Limit) Core() core.Limit {
	lim := core.Limit{Rate: int(l.RequestsPerUnit), Period: l.Period, Burst: l.Burst}
	if l.Algorithm == Compatible {
		lim.Algorithm = core.FixedWindow
	} else {
		lim.Algorithm = l.Algorithm.Core()
	}
	if lim.Burst == 0 {
		lim.Burst = lim.Rate
	}
	return lim
}

// unitLength is the window of each unit, as envoy counts them (a month is
// 30 days, a year 365).
var unitLength = map[Unit]time.Duration{
	rlspb.RateLimitResponse_RateLimit_SECOND: time.Second,
	rlspb.RateLimitResponse_RateLimit_MINUTE: time.Minute,
	rlspb.RateLimitResponse_RateLimit_HOUR:   time.Hour,
	rlspb.RateLimitResponse_RateLimit_DAY:    24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_WEEK:   7 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_MONTH:  30 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_YEAR:   365 * 24 * time.Hour,
}

// UnitLength returns the window of unit, and false for UNKNOWN or a value
// out of range.
func UnitLength(u Unit) (time.Duration, bool) {
	d, ok := unitLength[u]
	return d, ok
}

// unitFor returns the longest unit that fits in period.
func unitFor(period time.Duration) Unit {
	best, bestLen := rlspb.RateLimitResponse_RateLimit_SECOND, time.Duration(0)
	for u, d := range unitLength {
		if d <= period && d > bestLen {
			best, bestLen = u, d
		}
	}
	return best
}

// Rule is what a descriptor of the configuration applies: its limits, or
// unlimited, and envoy's flags.
type Rule struct {
	// FullKey names the descriptor in statistics: the domain and the
	// descriptor's key_value pairs from the root, joined by dots.
	FullKey string
	// Limits holds rate_limit first, then ratekit's limits. Empty when
	// Unlimited.
	Limits         []Limit
	Unlimited      bool
	ShadowMode     bool
	QuotaMode      bool
	DetailedMetric bool
	// Name is rate_limit's name, Replaces the names it replaces.
	Name     string
	Replaces []string
	// HitsAlwaysLand (ratekit's hits_always_land) lets every call's hits
	// land, as envoy's counting does, under ratekit's algorithms too: a
	// call whose hits do not fit is answered OVER_LIMIT and charged all
	// the same (core.Limiter.Charge), into a debt bounded by
	// core.MaxDebtPeriods, so that the hits a gateway sends once an answer
	// is done (Envoy Gateway's cost.response, Envoy AI Gateway's token
	// counts) are never lost, and later calls are over until the debt is
	// repaid.
	HitsAlwaysLand bool
	// Metadata is the descriptor's metadata (nil when it has none): the
	// dynamic metadata of an answer holds, under "metadata", that of
	// every descriptor its rule let through, merged (RESPONSE_DYNAMIC_METADATA).
	// Shared by every answer: read-only.
	Metadata *structpb.Struct
	// File and Line tell where the rule was written.
	File string
	Line int
}

// node is one descriptor of the tree: its children by "key_value" (or
// "key" for a descriptor without value), its rule, and its children whose
// "key_value" holds a wildcard, in file order.
type node struct {
	children        map[string]*node
	rule            *Rule
	wildcards       []wildcard
	valueToMetric   bool
	shareThreshold  bool
	wildcardPattern string
}

// Domain is one domain's descriptors.
type Domain struct {
	name    string
	root    node
	sources []Source // where it was written: one file, or several with MergeDomains
}

// Source is where a domain was written: its file's name (an xDS
// resource's is "xds:" and its name) and the line of its domain key.
type Source struct {
	File string
	Line int
}

// DomainInfo is one domain of a configuration and where it came from.
type DomainInfo struct {
	Name    string
	Sources []Source
	// Rules counts its descriptors with a rate_limit.
	Rules int
}

// Config is a loaded configuration: every domain of every file. It is
// immutable and safe for concurrent use.
type Config struct {
	domains map[string]*Domain
	files   []string
	rules   int
}

// Domain returns the named domain, or nil.
func (c *Config) Domain(name string) *Domain {
	if c == nil {
		return nil
	}
	return c.domains[name]
}

// Empty reports whether the configuration holds no domain.
func (c *Config) Empty() bool { return c == nil || len(c.domains) == 0 }

// Files returns the files loaded, in load order.
func (c *Config) Files() []string { return c.files }

// Rules returns the number of descriptors with a rate_limit.
func (c *Config) Rules() int { return c.rules }

// Domains returns the domains loaded, by name, each with where it was
// written and how many descriptors with a rate_limit it holds.
func (c *Config) Domains() []DomainInfo {
	if c == nil {
		return nil
	}
	out := make([]DomainInfo, 0, len(c.domains))
	for _, d := range c.domains {
		out = append(out, DomainInfo{Name: d.name, Sources: d.sources, Rules: d.root.rules()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// rules counts the descriptors with a rate_limit at and under n.
func (n *node) rules() int {
	c := 0
	if n.rule != nil {
		c = 1
	}
	for _, ch := range n.children {
		c += ch.rules()
	}
	return c
}

// Dump writes the configuration as envoy's /rlconfig does, one line per
// descriptor with a rate_limit, in sorted order; descriptors that use
// ratekit's keys say so at the end of their line.
func (c *Config) Dump() string {
	if c == nil {
		return ""
	}
	var lines []string
	for _, d := range c.domains {
		d.root.dump(&lines)
	}
	sort.Strings(lines)
	return strings.Join(lines, "")
}

func (n *node) dump(lines *[]string) {
	if r := n.rule; r != nil {
		var l Limit
		if len(r.Limits) > 0 {
			l = r.Limits[0]
		}
		line := fmt.Sprintf("%s: unit=%s requests_per_unit=%d, shadow_mode: %t, quota_mode: %t",
			r.FullKey, l.Unit, l.RequestsPerUnit, r.ShadowMode, r.QuotaMode)
		if r.Unlimited {
			line = fmt.Sprintf("%s: unit=UNKNOWN requests_per_unit=%d, shadow_mode: %t, quota_mode: %t",
				r.FullKey, l.RequestsPerUnit, r.ShadowMode, r.QuotaMode)
		}
		for i, l := range r.Limits {
			if l.Algorithm == Compatible && i == 0 && l.Period == unitLength[l.Unit] {
				continue
			}
			line += fmt.Sprintf(", ratekit: %s %d per %v", l.Algorithm, l.RequestsPerUnit, l.Period)
			if l.Algorithm == GCRA && l.Burst != int(l.RequestsPerUnit) {
				line += fmt.Sprintf(" burst %d", l.Burst)
			}
		}
		*lines = append(*lines, line+"\n")
	}
	for _, ch := range n.children {
		ch.dump(lines)
	}
}
