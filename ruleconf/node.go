package ruleconf

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// MaxSize is the largest document, in bytes, that [Parse] and [Load] read:
// ruleconf refuses a larger one with an error wrapping [ErrTooLarge].
const MaxSize = 4 << 20

// Node budget: the decoder visits at most baseNodes nodes plus one for
// every bytesPerNode bytes of the document, counting each node at every
// place an alias or merge key brings it (see the package documentation's
// Bounds). A document without aliases never comes near it: each of its
// nodes is visited once, and costs at least two bytes ("a," or "{}").
const (
	baseNodes    = 1 << 18
	bytesPerNode = 2
)

// nodeBudget returns the nodes the decoder may visit for a document of
// size bytes.
func nodeBudget(size int) int { return baseNodes + size/bytesPerNode }

// tooLarge is an error wrapping ErrTooLarge, which says why itself.
type tooLarge string

func (e tooLarge) Error() string { return string(e) }
func (e tooLarge) Unwrap() error { return ErrTooLarge }

// maxMergeDepth bounds merges within merges.
const maxMergeDepth = 16

// decoder turns the nodes of one document into rules.
type decoder struct {
	reg    *Registry
	file   string
	size   int // the document's bytes
	budget int // nodes still to visit
}

// visit spends n of the node budget, and returns an error about node at
// once it is spent: every loop over nodes calls it for the nodes it is
// about to visit, so that the decoder's work is bounded by the budget
// whatever the document's aliases expand to.
func (d *decoder) visit(at *yaml.Node, rule, field string, n int) error {
	if d.budget -= n; d.budget < 0 {
		return d.wrap(at, rule, field, tooLarge(fmt.Sprintf(
			"the document is too large: its aliases and merge keys expand to more than the %d nodes a document of %d bytes may have",
			nodeBudget(d.size), d.size)))
	}
	return nil
}

// errorf returns an *Error about node n.
func (d *decoder) errorf(n *yaml.Node, rule, field, format string, args ...any) *Error {
	return &Error{File: d.file, Line: n.Line, Rule: rule, Field: field, Err: fmt.Errorf(format, args...)}
}

// wrap returns an *Error about node n caused by err.
func (d *decoder) wrap(n *yaml.Node, rule, field string, err error) *Error {
	return &Error{File: d.file, Line: n.Line, Rule: rule, Field: field, Err: err}
}

// resolve returns the node an alias stands for, or n.
func resolve(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

// describe names the kind of value n holds, for errors.
func describe(n *yaml.Node) string {
	switch n = resolve(n); n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		tag := strings.TrimPrefix(n.ShortTag(), "!!")
		switch tag {
		case "null":
			return "null"
		case "str":
			return fmt.Sprintf("string %q", n.Value)
		case "int":
			tag = "integer"
		}
		return tag + " " + n.Value
	}
	return "nothing"
}

// entry is one key and value of a mapping.
type entry struct {
	key   string
	kline *yaml.Node // the key's node, for its line
	value *yaml.Node
}

// entries returns the entries of mapping n in order, each merge key ("<<")
// replaced by the entries of the mappings it merges that n does not set
// itself, an earlier merged mapping before a later one. A key written
// twice, a key that is not a string and a merge of anything but mappings
// are errors.
func (d *decoder) entries(n *yaml.Node, rule, field string, depth int) ([]entry, error) {
	if depth > maxMergeDepth {
		return nil, d.errorf(n, rule, field, "merges nested more than %d deep", maxMergeDepth)
	}
	// the mapping itself, even empty, and each of its keys and values
	if err := d.visit(n, rule, field, 1+len(n.Content)); err != nil {
		return nil, err
	}
	own := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			continue
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return nil, d.errorf(k, rule, field, "want a string key, got %s", describe(k))
		}
		if first, dup := own[k.Value]; dup {
			return nil, d.errorf(k, rule, field, "%q appears twice (first on line %d)", k.Value, first.Line)
		}
		own[k.Value] = k
	}
	out := make([]entry, 0, len(own))
	seen := make(map[string]bool, len(own))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() != "!!merge" {
			out = append(out, entry{key: k.Value, kline: k, value: v})
			seen[k.Value] = true
			continue
		}
		merged, err := d.merged(v, rule, field, depth)
		if err != nil {
			return nil, err
		}
		// each entry merged in is one more node visited here
		if err := d.visit(v, rule, field, len(merged)); err != nil {
			return nil, err
		}
		for _, e := range merged {
			if own[e.key] == nil && !seen[e.key] {
				out = append(out, e)
				seen[e.key] = true
			}
		}
	}
	return out, nil
}

// merged returns the entries that the value v of a merge key merges: those
// of one mapping or of a list of mappings, in order.
func (d *decoder) merged(v *yaml.Node, rule, field string, depth int) ([]entry, error) {
	v = resolve(v)
	srcs := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		srcs = v.Content
	}
	if err := d.visit(v, rule, field, len(srcs)); err != nil {
		return nil, err
	}
	var out []entry
	for _, src := range srcs {
		if src = resolve(src); src.Kind != yaml.MappingNode {
			return nil, d.errorf(src, rule, field, "a merge key (<<) merges mappings, got %s", describe(src))
		}
		es, err := d.entries(src, rule, field, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}

// mapping returns the entries of the mapping n, or an error if n is not
// one.
func (d *decoder) mapping(n *yaml.Node, rule, field string) ([]entry, error) {
	if n = resolve(n); n.Kind != yaml.MappingNode {
		return nil, d.errorf(n, rule, field, "want a mapping, got %s", describe(n))
	}
	return d.entries(n, rule, field, 0)
}

// scalar returns n, resolved, if it is a scalar tagged tag.
func scalar(n *yaml.Node, tag string) (*yaml.Node, bool) {
	n = resolve(n)
	return n, n.Kind == yaml.ScalarNode && n.ShortTag() == tag
}

// integer returns the integer n holds.
func (d *decoder) integer(n *yaml.Node, rule, field string) (int, error) {
	s, ok := scalar(n, "!!int")
	if !ok {
		if f, isFloat := scalar(n, "!!float"); isFloat && strings.Trim(f.Value, "+-0123456789") == "" {
			return 0, d.errorf(n, rule, field, "integer %s is out of range", f.Value)
		}
		return 0, d.errorf(n, rule, field, "want an integer, got %s", describe(n))
	}
	var v int
	if err := s.Decode(&v); err != nil {
		return 0, d.errorf(n, rule, field, "integer %s is out of range", s.Value)
	}
	return v, nil
}

// text returns the non-empty string n holds.
func (d *decoder) text(n *yaml.Node, rule, field string) (string, error) {
	s, ok := scalar(n, "!!str")
	switch {
	case !ok:
		return "", d.errorf(n, rule, field, "want a string, got %s", describe(n))
	case s.Value == "":
		return "", d.errorf(n, rule, field, "empty string")
	}
	return s.Value, nil
}

// boolean returns the true or false n holds.
func (d *decoder) boolean(n *yaml.Node, rule, field string) (bool, error) {
	s, ok := scalar(n, "!!bool")
	if !ok {
		return false, d.errorf(n, rule, field, "want true or false, got %s", describe(n))
	}
	var v bool
	if err := s.Decode(&v); err != nil {
		return false, d.wrap(n, rule, field, err)
	}
	return v, nil
}

// duration returns the Go duration n holds.
func (d *decoder) duration(n *yaml.Node, rule, field string) (time.Duration, error) {
	s, ok := scalar(n, "!!str")
	if !ok {
		hint := ""
		if _, isInt := scalar(n, "!!int"); isInt {
			hint = " (a number needs a unit)"
		}
		return 0, d.errorf(n, rule, field, "want a Go duration such as 1m or 30s%s, got %s", hint, describe(n))
	}
	p, err := time.ParseDuration(s.Value)
	if err != nil {
		return 0, d.errorf(n, rule, field, "want a Go duration such as 1m or 30s, got %q", s.Value)
	}
	return p, nil
}
