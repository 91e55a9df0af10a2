package otellimit

import (
	"maps"
	"strings"
	"sync"
	"sync/atomic"
)

// ruleTable keeps a value for each rule name, made on the name's first
// sighting, for at most limit names; every name seen after those shares
// the value of OtherRule. Lookups take no lock and allocate nothing: the
// table is an immutable view, replaced whole when a name is added.
type ruleTable[V any] struct {
	limit int
	build func(label string) *V // called under mu

	mu   sync.Mutex // serialises additions
	view atomic.Pointer[ruleView[V]]
}

// ruleView is one state of a ruleTable, never changed once published.
type ruleView[V any] struct {
	named map[string]*V
	other *V // set once named holds limit names
}

func newRuleTable[V any](limit int, build func(label string) *V) *ruleTable[V] {
	t := &ruleTable[V]{limit: limit, build: build}
	t.view.Store(&ruleView[V]{named: map[string]*V{}})
	return t
}

// get returns the value of the rule called name.
func (t *ruleTable[V]) get(name string) *V {
	v := t.view.Load()
	if r, ok := v.named[name]; ok {
		return r
	}
	if v.other != nil {
		return v.other
	}
	return t.add(name)
}

// add makes the value of name, or that of OtherRule if the table is full,
// and publishes a view that holds it.
func (t *ruleTable[V]) add(name string) *V {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := t.view.Load()
	if r, ok := v.named[name]; ok {
		return r
	}
	if v.other != nil {
		return v.other
	}
	next := &ruleView[V]{named: v.named}
	if len(v.named) < t.limit {
		next.named = maps.Clone(v.named)
		next.named[name] = t.build(ruleLabel(name))
	} else {
		next.other = t.build(OtherRule)
	}
	t.view.Store(next)
	if next.other != nil {
		return next.other
	}
	return next.named[name]
}

// ruleLabel returns the rule attribute of the rule called name: the name,
// with bytes that are not UTF-8 replaced, as attribute values must be.
func ruleLabel(name string) string {
	return strings.ToValidUTF8(name, "\uFFFD")
}
