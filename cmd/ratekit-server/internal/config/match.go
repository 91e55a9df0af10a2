package config

import (
	"strings"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// Match is what a descriptor matched.
type Match struct {
	// Rule is the rule to apply, or nil when the descriptor matches none
	// (it is then answered OK, without a limit).
	Rule *Rule
	// StatsKey names the descriptor in statistics, as envoy names it:
	// Rule.FullKey, or the descriptor's own values with detailed_metric
	// and value_to_metric.
	StatsKey string
	// Share holds, per entry, the wildcard value that stands for the
	// entry's own in the storage key (share_threshold), or "" for the
	// entry's own; nil when no entry shares.
	Share []string
}

// Match finds the rule of a descriptor's entries as envoy does: each entry
// first as key and value ("key_value"), then by the wildcards of its
// level in file order, then as key alone; a rule applies only where the
// entries end, so a descriptor with more or fewer entries than the
// configured depth matches nothing there.
func (d *Domain) Match(entries []*rlv3.RateLimitDescriptor_Entry) Match {
	var (
		m        Match
		children = d.root.children
		prev     = &d.root
		share    map[int]string
		detailed strings.Builder // domain.key_value... of the request
		enhanced strings.Builder // value_to_metric's key
	)
	detailed.WriteString(d.name)
	enhanced.WriteString(d.name)
	var rule *Rule
	for i, e := range entries {
		finalKey := e.GetKey() + "_" + e.GetValue()
		detailed.WriteByte('.')
		detailed.WriteString(finalKey)
		next := children[finalKey]
		wildcard := ""
		if next == nil {
			for _, w := range prev.wildcardKeys {
				if strings.HasPrefix(finalKey, strings.TrimSuffix(w, "*")) {
					next, wildcard = children[w], w
					break
				}
			}
		}
		byValue := next != nil
		if next == nil {
			next = children[e.GetKey()]
		}
		if wildcard != "" && next != nil && next.shareThreshold && next.wildcardPattern != "" {
			if share == nil {
				share = map[int]string{}
			}
			share[i] = strings.TrimPrefix(next.wildcardPattern, e.GetKey()+"_")
		}
		enhanced.WriteByte('.')
		enhanced.WriteString(e.GetKey())
		if next != nil {
			v := ""
			switch {
			case wildcard != "" && share[i] != "":
				v = share[i]
			case wildcard != "" && next.valueToMetric:
				v = e.GetValue()
			case wildcard != "":
				v = strings.TrimPrefix(wildcard, e.GetKey()+"_")
			case byValue:
				v = e.GetValue()
			case next.valueToMetric:
				v = e.GetValue()
			}
			if v != "" {
				enhanced.WriteByte('_')
				enhanced.WriteString(v)
			}
		}
		if next != nil && next.rule != nil && i == len(entries)-1 {
			rule = next.rule
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		children = next.children
		prev = next
	}
	if rule == nil {
		return m
	}
	m.Rule = rule
	if len(share) > 0 {
		m.Share = make([]string, len(entries))
		for i, v := range share {
			m.Share[i] = v
		}
	}
	switch {
	case rule.DetailedMetric && m.Share != nil:
		var b strings.Builder
		b.WriteString(d.name)
		for i, e := range entries {
			b.WriteByte('.')
			b.WriteString(e.GetKey())
			switch {
			case i < len(m.Share) && m.Share[i] != "":
				b.WriteByte('_')
				b.WriteString(m.Share[i])
			case e.GetValue() != "":
				b.WriteByte('_')
				b.WriteString(e.GetValue())
			}
		}
		m.StatsKey = b.String()
	case rule.DetailedMetric:
		m.StatsKey = detailed.String()
	default:
		m.StatsKey = rule.FullKey
		if k := enhanced.String(); k != rule.FullKey {
			m.StatsKey = k
		}
	}
	return m
}

// OverrideStatsKey names in statistics a descriptor that carries its own
// limit, as envoy does: the domain and the entries' key_value pairs.
func OverrideStatsKey(domain string, entries []*rlv3.RateLimitDescriptor_Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	b.WriteByte('.')
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.GetKey())
		if e.GetValue() != "" {
			b.WriteByte('_')
			b.WriteString(e.GetValue())
		}
	}
	return b.String()
}
