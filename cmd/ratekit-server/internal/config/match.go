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
		w    walk
		at   = &d.root
		rule *Rule
	)
	w.detailed.WriteString(d.name)
	w.enhanced.WriteString(d.name)
	for i, e := range entries {
		next := w.step(at, i, e)
		if next != nil && next.rule != nil && i == len(entries)-1 {
			rule = next.rule
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		at = next
	}
	if rule == nil {
		return Match{}
	}
	m := Match{Rule: rule, Share: w.shares(len(entries))}
	m.StatsKey = w.statsKey(d.name, rule, entries, m.Share)
	return m
}

// walk is what Match gathers on its way down the tree, entry by entry.
type walk struct {
	share    map[int]string  // share_threshold's wildcard value, by entry
	detailed strings.Builder // domain.key_value... of the request
	enhanced strings.Builder // value_to_metric's key
}

// step finds the child of n that entry i, e, selects (nil for none), and
// adds the entry to the statistics names.
func (w *walk) step(n *node, i int, e *rlv3.RateLimitDescriptor_Entry) *node {
	finalKey := e.GetKey() + "_" + e.GetValue()
	w.detailed.WriteByte('.')
	w.detailed.WriteString(finalKey)
	next, wildcard, byValue := n.child(e.GetKey(), finalKey)
	if wildcard != "" && next != nil && next.shareThreshold && next.wildcardPattern != "" {
		if w.share == nil {
			w.share = map[int]string{}
		}
		w.share[i] = strings.TrimPrefix(next.wildcardPattern, e.GetKey()+"_")
	}
	w.enhanced.WriteByte('.')
	w.enhanced.WriteString(e.GetKey())
	if next != nil {
		if v := metricValue(e, next, wildcard, w.share[i], byValue); v != "" {
			w.enhanced.WriteByte('_')
			w.enhanced.WriteString(v)
		}
	}
	return next
}

// child returns the child of n for an entry of key and key_value
// finalKey, as envoy's service picks it: by finalKey, else by the first
// of n's wildcards in file order that matches finalKey (returned as
// wildcard), however specific the others, else by key alone; byValue
// reports a match by finalKey or a wildcard.
func (n *node) child(key, finalKey string) (next *node, wildcard string, byValue bool) {
	next = n.children[finalKey]
	if next == nil {
		for _, w := range n.wildcards {
			if w.match(finalKey) {
				next, wildcard = n.children[w.key], w.key
				break
			}
		}
	}
	byValue = next != nil
	if next == nil {
		next = n.children[key]
	}
	return next, wildcard, byValue
}

// wildcard is a "key_value" that holds a *, which matches any run of
// characters, even none: the text between its stars, split once when
// the file is read.
type wildcard struct {
	key   string
	parts []string // key split at each *: at least two
}

func newWildcard(key string) wildcard {
	return wildcard{key: key, parts: strings.Split(key, "*")}
}

// match reports whether s matches w: it starts with w's first part, ends
// with its last, and holds the others in order between them, apart.
func (w wildcard) match(s string) bool {
	first, last := w.parts[0], w.parts[len(w.parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, p := range w.parts[1 : len(w.parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}

// metricValue returns what follows entry e's key in value_to_metric's
// statistics name, "" for nothing, when e selects next (by wildcard, when
// not "", sharing share, when not "").
func metricValue(e *rlv3.RateLimitDescriptor_Entry, next *node, wildcard, share string, byValue bool) string {
	switch {
	case wildcard != "" && share != "":
		return share
	case wildcard != "" && next.valueToMetric:
		return e.GetValue()
	case wildcard != "":
		return strings.TrimPrefix(wildcard, e.GetKey()+"_")
	case byValue:
		return e.GetValue()
	case next.valueToMetric:
		return e.GetValue()
	}
	return ""
}

// shares returns Match's Share for a descriptor of n entries, nil when no
// entry shares.
func (w *walk) shares(n int) []string {
	if len(w.share) == 0 {
		return nil
	}
	out := make([]string, n)
	for i, v := range w.share {
		out[i] = v
	}
	return out
}

// statsKey returns Match's StatsKey for a descriptor whose entries match
// rule, with Match's share.
func (w *walk) statsKey(domain string, rule *Rule, entries []*rlv3.RateLimitDescriptor_Entry, share []string) string {
	switch {
	case rule.DetailedMetric && share != nil:
		return sharedStatsKey(domain, entries, share)
	case rule.DetailedMetric:
		return w.detailed.String()
	}
	if k := w.enhanced.String(); k != rule.FullKey {
		return k
	}
	return rule.FullKey
}

// sharedStatsKey names in statistics a detailed_metric descriptor with an
// entry that shares: the domain and each entry's key, with the wildcard
// value it shares or its own value.
func sharedStatsKey(domain string, entries []*rlv3.RateLimitDescriptor_Entry, share []string) string {
	var b strings.Builder
	b.WriteString(domain)
	for i, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.GetKey())
		switch {
		case i < len(share) && share[i] != "":
			b.WriteByte('_')
			b.WriteString(share[i])
		case e.GetValue() != "":
			b.WriteByte('_')
			b.WriteString(e.GetValue())
		}
	}
	return b.String()
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
