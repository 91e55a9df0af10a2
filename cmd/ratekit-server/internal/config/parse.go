package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratekit/ratekit/core"
)

// Error is a file refused: the file, the line (0 when none applies) and
// what is wrong.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Warning is a key of envoy's in a place where envoy accepts and ignores
// it, such as a rate_limit's unit at a descriptor's level.
type Warning = Error

// envoyKeys are the keys envoy accepts anywhere in a file.
var envoyKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
	"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true,
	"quota_mode": true, "name": true, "replaces": true, "detailed_metric": true,
	"value_to_metric": true, "share_threshold": true, "metadata": true,
}

// ratekitKeys are ratekit's own keys, with the level they belong to.
var ratekitKeys = map[string]string{
	"algorithm": "rate_limit", "burst": "rate_limit", "unit_multiplier": "rate_limit",
	"period": "rate_limit", "limits": "descriptor", "hits_always_land": "descriptor",
}

// Limits on what one file may make the parser do.
const (
	// MaxFileSize is the largest file read.
	MaxFileSize = 64 << 20
	// maxDepth bounds the nesting of descriptors.
	maxDepth = 64
	// maxLimits bounds the limits of one descriptor (rate_limit and
	// ratekit's limits): they are decided in one script call.
	maxLimits = 16
)

// Options are what a load needs to know of the settings.
type Options struct {
	// DefaultAlgorithm counts the limits that name no algorithm
	// (RATEKIT_ALGORITHM); Compatible by default.
	DefaultAlgorithm Algorithm
	// MergeDomains lets several files add descriptors to one domain
	// (MERGE_DOMAIN_CONFIG), which is otherwise an error.
	MergeDomains bool
}

// File is one file's name and contents.
type File struct {
	Name string
	Data []byte
}

// Load parses files, in order, into one configuration. The first file
// that is refused makes Load return an *Error naming it and, where one
// applies, the line; nothing of the other files is kept. Warnings are
// keys envoy would accept and ignore.
func Load(files []File, opts Options) (*Config, []Warning, error) {
	c := &Config{domains: map[string]*Domain{}}
	var warns []Warning
	for _, f := range files {
		p := parser{file: f.Name, opts: opts, cfg: c}
		if err := p.parseFile(f.Data); err != nil {
			return nil, warns, err
		}
		warns = append(warns, p.warns...)
		c.files = append(c.files, f.Name)
	}
	return c, warns, nil
}

type parser struct {
	file   string
	opts   Options
	cfg    *Config
	warns  []Warning
	budget int // nodes the walk may still visit, aliases expanded
}

func (p *parser) errf(n *yaml.Node, format string, args ...any) error {
	e := &Error{File: p.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line = n.Line
	}
	return e
}

func (p *parser) warnf(n *yaml.Node, format string, args ...any) {
	p.warns = append(p.warns, Warning{File: p.file, Line: n.Line, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) parseFile(data []byte) error {
	if len(data) > MaxFileSize {
		return p.errf(nil, "file of %d bytes is larger than %d", len(data), MaxFileSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	switch {
	case errors.Is(err, io.EOF):
		return p.errf(nil, "config file cannot have empty domain")
	case err != nil:
		return p.errf(nil, "error loading config file: %s", err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return p.errf(&more, "more than one YAML document in one file")
	} else if !errors.Is(err, io.EOF) {
		return p.errf(nil, "error loading config file: %s", err)
	}
	// Every node is visited once unless aliases repeat it: a file may
	// expand to at most 8 times its own nodes, and a million at least.
	p.budget = max(1_000_000, 8*countNodes(&doc, 0))
	root, err := p.deref(&doc)
	if err != nil {
		return err
	}
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root, err = p.deref(root.Content[0])
		if err != nil {
			return err
		}
	}
	return p.parseRoot(root)
}

// countNodes counts the nodes of a tree, aliases not followed.
func countNodes(n *yaml.Node, depth int) int {
	if depth > 10_000 {
		return 0
	}
	c := 1
	for _, ch := range n.Content {
		c += countNodes(ch, depth+1)
	}
	return c
}

// deref follows aliases, spending the budget.
func (p *parser) deref(n *yaml.Node) (*yaml.Node, error) {
	for i := 0; n.Kind == yaml.AliasNode; i++ {
		if n.Alias == nil || i > 100 {
			return nil, p.errf(n, "alias to nothing")
		}
		n = n.Alias
	}
	p.budget--
	if p.budget < 0 {
		return nil, p.errf(n, "document contains excessive aliasing")
	}
	return n, nil
}

// pair is one key and value of a mapping.
type pair struct {
	key   string
	knode *yaml.Node
	value *yaml.Node
}

// mapping returns the pairs of mapping node n, merge keys (<<) expanded
// (a key written in the mapping beats a merged one; of merged ones, the
// first), refusing keys that are not strings and keys written twice.
func (p *parser) mapping(n *yaml.Node, what string) ([]pair, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "%s must be a mapping, not %s", what, kindName(n))
	}
	return p.mappingPairs(n, 0)
}

// mappingPairs returns the pairs of mapping node n as mapping does; depth
// counts the merge keys followed to n.
func (p *parser) mappingPairs(n *yaml.Node, depth int) ([]pair, error) {
	if depth > 16 {
		return nil, p.errf(n, "merge keys nested too deep")
	}
	var (
		out    []pair
		merged []*yaml.Node
	)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		pr, merge, err := p.mappingPair(n.Content[i], n.Content[i+1])
		if err != nil {
			return nil, err
		}
		if merge {
			merged = append(merged, pr.value)
			continue
		}
		if at, dup := seen[pr.key]; dup {
			return nil, p.errf(pr.knode, "key %q given twice in one mapping (first at line %d)", pr.key, at)
		}
		seen[pr.key] = pr.knode.Line
		out = append(out, pr)
	}
	for _, vn := range merged {
		var err error
		if out, err = p.merge(out, seen, vn, depth); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mappingPair returns one key and value of a mapping, aliases followed,
// refusing a key that is not a string; merge reports a merge key (<<),
// whose value names the mappings to merge.
func (p *parser) mappingPair(k, v *yaml.Node) (pr pair, merge bool, err error) {
	kn, err := p.deref(k)
	if err != nil {
		return pair{}, false, err
	}
	vn, err := p.deref(v)
	if err != nil {
		return pair{}, false, err
	}
	if kn.Kind != yaml.ScalarNode {
		return pair{}, false, p.errf(kn, "config error, key is not of type string")
	}
	s := resolve(kn)
	if kn.Value == "<<" && s.kind == kindStr && kn.Style == 0 {
		return pair{knode: kn, value: vn}, true, nil
	}
	if s.kind != kindStr {
		return pair{}, false, p.errf(kn, "config error, key is not of type string: %v", kn.Value)
	}
	return pair{key: kn.Value, knode: kn, value: vn}, false, nil
}

// merge appends to out the pairs of the mappings merge key value vn names
// whose keys are not in seen yet, and adds their keys to seen; depth is
// that of the mapping holding the merge key.
func (p *parser) merge(out []pair, seen map[string]int, vn *yaml.Node, depth int) ([]pair, error) {
	sources, err := p.mergeSources(vn)
	if err != nil {
		return nil, err
	}
	for _, m := range sources {
		if m.Kind != yaml.MappingNode {
			return nil, p.errf(m, "a merge key takes mappings, not %s", kindName(m))
		}
		prs, err := p.mappingPairs(m, depth+1)
		if err != nil {
			return nil, err
		}
		for _, pr := range prs {
			if _, ok := seen[pr.key]; !ok {
				seen[pr.key] = pr.knode.Line
				out = append(out, pr)
			}
		}
	}
	return out, nil
}

// mergeSources returns what a merge key's value vn names, aliases
// followed: vn itself when it is a mapping, or the elements of a list.
func (p *parser) mergeSources(vn *yaml.Node) ([]*yaml.Node, error) {
	switch vn.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{vn}, nil
	case yaml.SequenceNode:
		var sources []*yaml.Node
		for _, e := range vn.Content {
			m, err := p.deref(e)
			if err != nil {
				return nil, err
			}
			sources = append(sources, m)
		}
		return sources, nil
	}
	return nil, p.errf(vn, "a merge key takes a mapping, not %s", kindName(vn))
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if k := resolve(n).kind; k == kindInt || k == kindUint {
			return "an int"
		} else {
			return "a " + k.String()
		}
	}
	return "nothing"
}

// checkKey refuses a key that is neither envoy's nor ratekit's, and warns
// of one of envoy's that envoy would ignore where it stands (level is
// "root", "descriptor", "rate_limit" or "replaces").
func (p *parser) checkKey(pr pair, level string, used bool) error {
	if lvl, ok := ratekitKeys[pr.key]; ok {
		if lvl != level && !(level == "limits" && lvl == "rate_limit") {
			return p.errf(pr.knode, "ratekit's key %q belongs in a %s, not in a %s", pr.key, lvl, level)
		}
		return nil
	}
	if !envoyKeys[pr.key] {
		return p.errf(pr.knode, "config error, unknown key '%s'", pr.key)
	}
	if !used {
		p.warnf(pr.knode, "key %q means nothing in a %s; envoy ignores it too", pr.key, level)
	}
	if pr.key == "metadata" {
		return nil // any value, as envoy's key check skips it
	}
	return p.leafTypes(pr.value, 0)
}

// leafTypes refuses what envoy's key check refuses anywhere in a value:
// floats, integers beyond the int64 range, lists of anything but mappings,
// and keys outside envoy's set. The value of a metadata key is not
// checked: it may hold anything.
func (p *parser) leafTypes(n *yaml.Node, depth int) error {
	if depth > maxDepth*4 {
		return p.errf(n, "nested too deep")
	}
	switch n.Kind {
	case yaml.ScalarNode:
		switch resolve(n).kind {
		case kindFloat, kindUint:
			return p.errf(n, "error checking config")
		}
	case yaml.SequenceNode:
		for _, e := range n.Content {
			e, err := p.deref(e)
			if err != nil {
				return err
			}
			if e.Kind != yaml.MappingNode {
				return p.errf(e, "config error, yaml file contains list of type other than map: %v", e.Value)
			}
			if err := p.leafTypes(e, depth+1); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		prs, err := p.mapping(n, "a value")
		if err != nil {
			return err
		}
		for _, pr := range prs {
			if _, ok := ratekitKeys[pr.key]; !ok && !envoyKeys[pr.key] {
				return p.errf(pr.knode, "config error, unknown key '%s'", pr.key)
			}
			if pr.key == "metadata" {
				continue
			}
			if err := p.leafTypes(pr.value, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// str decodes a string field: any scalar but null, as its text.
func (p *parser) str(pr pair) (string, error) {
	if err := p.leafTypes(pr.value, 0); err != nil {
		return "", err
	}
	if pr.value.Kind != yaml.ScalarNode {
		return "", p.errf(pr.value, "cannot unmarshal %s into %s (a string)", kindName(pr.value), pr.key)
	}
	if resolve(pr.value).kind == kindNull {
		return "", nil
	}
	return pr.value.Value, nil
}

func (p *parser) boolean(pr pair) (bool, error) {
	if err := p.leafTypes(pr.value, 0); err != nil {
		return false, err
	}
	if pr.value.Kind == yaml.ScalarNode {
		switch s := resolve(pr.value); s.kind {
		case kindNull:
			return false, nil
		case kindBool:
			return s.b, nil
		}
	}
	return false, p.errf(pr.value, "cannot unmarshal %s `%s` into %s (a bool)", kindName(pr.value), pr.value.Value, pr.key)
}

func (p *parser) uint32(pr pair) (uint32, error) {
	if err := p.leafTypes(pr.value, 0); err != nil {
		return 0, err
	}
	if pr.value.Kind == yaml.ScalarNode {
		s := resolve(pr.value)
		if s.kind == kindNull {
			return 0, nil
		}
		if v, ok := s.uint32Of(); ok {
			return v, nil
		}
	}
	return 0, p.errf(pr.value, "cannot unmarshal %s `%s` into %s (a uint32)", kindName(pr.value), pr.value.Value, pr.key)
}

// list returns the elements of a list value (null is an empty list).
func (p *parser) list(pr pair) ([]*yaml.Node, error) {
	n := pr.value
	if n.Kind == yaml.ScalarNode && resolve(n).kind == kindNull {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, "cannot unmarshal %s into %s (a list)", kindName(n), pr.key)
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for _, e := range n.Content {
		e, err := p.deref(e)
		if err != nil {
			return nil, err
		}
		if e.Kind != yaml.MappingNode {
			return nil, p.errf(e, "config error, yaml file contains list of type other than map: %v", e.Value)
		}
		out = append(out, e)
	}
	return out, nil
}

// checkedList returns the elements of a list value, as list does, once
// leafTypes has checked the whole value.
func (p *parser) checkedList(pr pair) ([]*yaml.Node, error) {
	if err := p.leafTypes(pr.value, 0); err != nil {
		return nil, err
	}
	return p.list(pr)
}

func (p *parser) parseRoot(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && resolve(n).kind == kindNull {
		return p.errf(n, "config file cannot have empty domain")
	}
	prs, err := p.mapping(n, "a file")
	if err != nil {
		return err
	}
	var (
		domain string
		descs  []*yaml.Node
		dnode  = n
	)
	for _, pr := range prs {
		switch pr.key {
		case "domain":
			if domain, err = p.str(pr); err != nil {
				return err
			}
			dnode = pr.value
		case "descriptors":
			if descs, err = p.checkedList(pr); err != nil {
				return err
			}
		default:
			if err := p.checkKey(pr, "file", false); err != nil {
				return err
			}
		}
	}
	if domain == "" {
		return p.errf(dnode, "config file cannot have empty domain")
	}
	d, present := p.cfg.domains[domain]
	if present && !p.opts.MergeDomains {
		return p.errf(dnode, "duplicate domain '%s' in config file", domain)
	}
	if !present {
		d = &Domain{name: domain, root: node{children: map[string]*node{}}}
	}
	if err := p.descriptors(&d.root, domain+".", descs, 0); err != nil {
		return err
	}
	d.sources = append(d.sources, Source{File: p.file, Line: dnode.Line})
	p.cfg.domains[domain] = d
	return nil
}

// descriptors loads a list of descriptors under parent, as envoy's
// loadDescriptors does, in file order.
func (p *parser) descriptors(parent *node, parentKey string, list []*yaml.Node, depth int) error {
	if depth >= maxDepth {
		if len(list) > 0 {
			return p.errf(list[0], "descriptors nested deeper than %d levels", maxDepth)
		}
		return nil
	}
	for _, dn := range list {
		if err := p.descriptor(parent, parentKey, dn, depth); err != nil {
			return err
		}
	}
	return nil
}

// rawDescriptor is one descriptor's keys as read, before they are checked
// together.
type rawDescriptor struct {
	key, value                                    string
	rateLimit, limits                             *yaml.Node
	childList                                     []*yaml.Node
	shadow, quota, detailed, valueToMetric, share bool
	alwaysLand                                    bool
	metadata                                      *structpb.Struct
	metadataNode                                  *yaml.Node
}

// descriptor loads descriptor dn, and the descriptors under it, as a
// child of parent.
func (p *parser) descriptor(parent *node, parentKey string, dn *yaml.Node, depth int) error {
	r, err := p.rawDescriptor(dn)
	if err != nil {
		return err
	}
	if r.key == "" {
		return p.errf(dn, "descriptor has empty key")
	}
	finalKey := r.key
	if r.value != "" {
		finalKey += "_" + r.value
	}
	fullKey := parentKey + finalKey
	if _, dup := parent.children[finalKey]; dup {
		return p.errf(dn, "duplicate descriptor composite key '%s'", fullKey)
	}
	var rule *Rule
	if r.rateLimit != nil {
		if rule, err = p.rule(&r, fullKey, dn); err != nil {
			return err
		}
		p.cfg.rules++
		rule.Metadata = r.metadata
	} else if r.limits != nil {
		return p.errf(r.limits, "limits needs a rate_limit beside it")
	} else if r.metadata != nil {
		p.warnf(r.metadataNode, "metadata means nothing without a rate_limit beside it; envoy ignores it too")
	}
	wild := strings.Contains(finalKey, "*")
	if r.share && !wild {
		return p.errf(dn, "share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", finalKey)
	}
	nd := &node{children: map[string]*node{}, rule: rule, valueToMetric: r.valueToMetric, shareThreshold: r.share}
	if r.share {
		nd.wildcardPattern = finalKey
	}
	if wild {
		parent.wildcards = append(parent.wildcards, newWildcard(finalKey))
	}
	if err := p.descriptors(nd, fullKey+".", r.childList, depth+1); err != nil {
		return err
	}
	parent.children[finalKey] = nd
	return nil
}

// rawDescriptor reads the keys of descriptor dn, each checked on its own.
func (p *parser) rawDescriptor(dn *yaml.Node) (rawDescriptor, error) {
	var r rawDescriptor
	prs, err := p.mapping(dn, "a descriptor")
	if err != nil {
		return r, err
	}
	for _, pr := range prs {
		switch pr.key {
		case "key":
			r.key, err = p.str(pr)
		case "value":
			r.value, err = p.str(pr)
		case "rate_limit":
			r.rateLimit, err = p.rateLimit(pr)
		case "descriptors":
			r.childList, err = p.checkedList(pr)
		case "limits":
			r.limits = pr.value
		case "shadow_mode":
			r.shadow, err = p.boolean(pr)
		case "quota_mode":
			r.quota, err = p.boolean(pr)
		case "detailed_metric":
			r.detailed, err = p.boolean(pr)
		case "value_to_metric":
			r.valueToMetric, err = p.boolean(pr)
		case "share_threshold":
			r.share, err = p.boolean(pr)
		case "hits_always_land":
			r.alwaysLand, err = p.boolean(pr)
		case "metadata":
			r.metadata, err = p.metadata(pr)
			r.metadataNode = pr.knode
		default:
			err = p.checkKey(pr, "descriptor", false)
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// rateLimit returns a descriptor's rate_limit block, or nil when it is
// null; rule reads the block.
func (p *parser) rateLimit(pr pair) (*yaml.Node, error) {
	if err := p.leafTypes(pr.value, 0); err != nil {
		return nil, err
	}
	if pr.value.Kind == yaml.ScalarNode && resolve(pr.value).kind == kindNull {
		return nil, nil
	}
	if pr.value.Kind != yaml.MappingNode {
		return nil, p.errf(pr.value, "cannot unmarshal %s into rate_limit (a mapping)", kindName(pr.value))
	}
	return pr.value, nil
}

// rule reads a descriptor's rate_limit and ratekit's limits.
func (p *parser) rule(r *rawDescriptor, fullKey string, dn *yaml.Node) (*Rule, error) {
	rule := &Rule{FullKey: fullKey, ShadowMode: r.shadow, QuotaMode: r.quota, DetailedMetric: r.detailed,
		HitsAlwaysLand: r.alwaysLand, File: p.file, Line: dn.Line}
	first, err := p.limit(r.rateLimit, rule, "rate_limit", nil)
	if err != nil {
		return nil, err
	}
	rule.Limits = append(rule.Limits, first)
	if r.limits == nil {
		return rule, nil
	}
	if rule.Unlimited {
		return nil, p.errf(r.limits, "an unlimited descriptor has no limits")
	}
	items, err := p.list(pair{key: "limits", value: r.limits})
	if err != nil {
		return nil, err
	}
	if len(items)+1 > maxLimits {
		return nil, p.errf(r.limits, "%d limits on one descriptor; at most %d", len(items)+1, maxLimits)
	}
	for _, it := range items {
		l, err := p.limit(it, nil, "limits", &first)
		if err != nil {
			return nil, err
		}
		rule.Limits = append(rule.Limits, l)
	}
	if err := p.severalLimits(rule, r.limits); err != nil {
		return nil, err
	}
	return rule, nil
}

// severalLimits refuses several limits on one descriptor that cannot be
// decided together: one counted as envoy counts, or two of one name in
// storage keys.
func (p *parser) severalLimits(rule *Rule, limits *yaml.Node) error {
	for i, l := range rule.Limits {
		if l.Algorithm == Compatible {
			return p.errf(limits, "limit %d of %s counts as envoy does; several limits on one descriptor are decided all or nothing and need one of ratekit's algorithms (algorithm: gcra, fixed, sliding-log or sliding-counter)", i+1, rule.FullKey)
		}
	}
	seen := map[string]bool{}
	for i := range rule.Limits {
		n := limitName(rule.Limits, i)
		if seen[n] {
			return p.errf(limits, "two limits of %s are named %q", rule.FullKey, n)
		}
		seen[n] = true
	}
	return nil
}

// limitName names the i-th limit of a descriptor in storage keys: its
// name, or its position.
func limitName(ls []Limit, i int) string {
	if ls[i].Name != "" {
		return ls[i].Name
	}
	return fmt.Sprintf("#%d", i)
}

// LimitName names the i-th limit of r in storage keys.
func (r *Rule) LimitName(i int) string { return limitName(r.Limits, i) }

// limitBlock is one rate_limit block or one of ratekit's limits as it is
// read: the limit so far, and the values and nodes of the keys that are
// checked together once every key is read.
type limitBlock struct {
	n            *yaml.Node // the block
	rule         *Rule      // the descriptor's rule for rate_limit, nil for one of ratekit's limits
	l            Limit
	unit         string
	unlimited    bool
	mult, burst  uint32
	replaceNodes []*yaml.Node
	// the nodes of the keys given, nil for those not given
	unitNode, periodNode, algNode, burstNode, multNode *yaml.Node
}

// limitKeys holds the reader of each key a limit uses; checkKey checks
// the others.
var limitKeys = map[string]func(*parser, *limitBlock, pair) error{
	"requests_per_unit": (*parser).limitRequestsPerUnit,
	"unit":              (*parser).limitUnit,
	"name":              (*parser).limitName,
	"unlimited":         (*parser).limitUnlimited,
	"replaces":          (*parser).limitReplaces,
	"algorithm":         (*parser).limitAlgorithm,
	"burst":             (*parser).limitBurst,
	"unit_multiplier":   (*parser).limitUnitMultiplier,
	"period":            (*parser).limitPeriod,
}

// limit reads one rate_limit block (rule set) or one of ratekit's limits
// (rule nil, inheriting from first).
func (p *parser) limit(n *yaml.Node, rule *Rule, level string, first *Limit) (Limit, error) {
	prs, err := p.mapping(n, level)
	if err != nil {
		return Limit{}, err
	}
	b := &limitBlock{n: n, rule: rule}
	if first != nil {
		b.l.Algorithm = first.Algorithm
	} else {
		b.l.Algorithm = p.opts.DefaultAlgorithm
	}
	for _, pr := range prs {
		if read, ok := limitKeys[pr.key]; ok {
			err = read(p, b, pr)
		} else {
			err = p.checkKey(pr, level, false)
		}
		if err != nil {
			return Limit{}, err
		}
	}
	u, validUnit := unitNamed(b.unit)
	b.l.Unit = u
	if b.unlimited {
		if validUnit {
			return Limit{}, p.errf(b.unitNode, "should not specify rate limit unit when unlimited")
		}
		rule.Unlimited = true
	}
	if rule != nil {
		if err := p.replaces(b); err != nil {
			return Limit{}, err
		}
		rule.Name = b.l.Name
	}
	if b.unlimited {
		return p.unlimitedLimit(b)
	}
	return p.countedLimit(b, validUnit)
}

// limitRequestsPerUnit reads requests_per_unit.
func (p *parser) limitRequestsPerUnit(b *limitBlock, pr pair) (err error) {
	b.l.RequestsPerUnit, err = p.uint32(pr)
	return err
}

// limitUnit reads unit, which countedLimit checks.
func (p *parser) limitUnit(b *limitBlock, pr pair) (err error) {
	b.unit, err = p.str(pr)
	b.unitNode = pr.value
	return err
}

// limitName reads name.
func (p *parser) limitName(b *limitBlock, pr pair) (err error) {
	b.l.Name, err = p.str(pr)
	return err
}

// limitUnlimited reads unlimited, which only rate_limit may hold.
func (p *parser) limitUnlimited(b *limitBlock, pr pair) (err error) {
	if b.rule == nil {
		return p.errf(pr.knode, "a limit in limits cannot be unlimited")
	}
	b.unlimited, err = p.boolean(pr)
	return err
}

// limitReplaces reads the list of replaces, which only rate_limit may
// hold; replaces reads its entries.
func (p *parser) limitReplaces(b *limitBlock, pr pair) (err error) {
	if b.rule == nil {
		return p.errf(pr.knode, "replaces belongs in rate_limit")
	}
	b.replaceNodes, err = p.checkedList(pr)
	return err
}

// limitAlgorithm reads ratekit's algorithm.
func (p *parser) limitAlgorithm(b *limitBlock, pr pair) error {
	s, err := p.str(pr)
	if err != nil {
		return err
	}
	b.algNode = pr.value
	if b.l.Algorithm, err = ParseAlgorithm(s); err != nil {
		return p.errf(pr.value, "%s", err)
	}
	return nil
}

// limitBurst reads ratekit's burst, which countedLimit checks.
func (p *parser) limitBurst(b *limitBlock, pr pair) (err error) {
	b.burst, err = p.uint32(pr)
	b.burstNode = pr.value
	return err
}

// limitUnitMultiplier reads ratekit's unit_multiplier, which countedLimit
// checks.
func (p *parser) limitUnitMultiplier(b *limitBlock, pr pair) (err error) {
	b.mult, err = p.uint32(pr)
	b.multNode = pr.value
	return err
}

// limitPeriod reads ratekit's period: a positive Go duration.
func (p *parser) limitPeriod(b *limitBlock, pr pair) error {
	s, err := p.str(pr)
	if err != nil {
		return err
	}
	b.periodNode = pr.value
	if b.l.Period, err = time.ParseDuration(s); err != nil || b.l.Period <= 0 {
		return p.errf(pr.value, "period %q is no positive Go duration (such as 90s or 5m)", s)
	}
	return nil
}

// unitNamed returns envoy's unit named s, in any case, and whether s
// names one (UNKNOWN names none).
func unitNamed(s string) (Unit, bool) {
	u, ok := rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(s)]
	return Unit(u), ok && u != int32(rlspb.RateLimitResponse_RateLimit_UNKNOWN)
}

// replaces reads the entries of rate_limit's replaces into its rule: the
// names of other descriptors' rate_limits, never its own.
func (p *parser) replaces(b *limitBlock) error {
	for _, rn := range b.replaceNodes {
		name, err := p.replacesEntry(rn)
		if err != nil {
			return err
		}
		if name == b.l.Name {
			return p.errf(rn, "replaces should not contain name of same descriptor")
		}
		b.rule.Replaces = append(b.rule.Replaces, name)
	}
	return nil
}

// replacesEntry returns the name of one entry of replaces, which must
// have one.
func (p *parser) replacesEntry(rn *yaml.Node) (string, error) {
	prs, err := p.mapping(rn, "a replaces entry")
	if err != nil {
		return "", err
	}
	name := ""
	for _, pr := range prs {
		if pr.key == "name" {
			if name, err = p.str(pr); err != nil {
				return "", err
			}
		} else if err := p.checkKey(pr, "replaces", false); err != nil {
			return "", err
		}
	}
	if name == "" {
		return "", p.errf(rn, "should not have an empty replaces entry")
	}
	return name, nil
}

// unlimitedLimit returns the limit of an unlimited rate_limit, which
// takes none of ratekit's keys.
func (p *parser) unlimitedLimit(b *limitBlock) (Limit, error) {
	for _, extra := range []*yaml.Node{b.algNode, b.burstNode, b.multNode, b.periodNode} {
		if extra != nil {
			return Limit{}, p.errf(extra, "an unlimited descriptor takes none of ratekit's limit keys")
		}
	}
	return b.l, nil
}

// countedLimit completes a limit that counts: its window, from unit and
// unit_multiplier or from period, and its burst, checked as ratekit
// counts them.
func (p *parser) countedLimit(b *limitBlock, validUnit bool) (Limit, error) {
	l := &b.l
	switch {
	case b.periodNode != nil && (b.unitNode != nil && b.unit != "" || b.multNode != nil):
		return Limit{}, p.errf(b.periodNode, "period replaces unit and unit_multiplier: give one or the other")
	case b.periodNode != nil:
		l.Unit = unitFor(l.Period)
	case !validUnit:
		return Limit{}, p.errf(orNode(b.unitNode, b.n), "invalid rate limit unit '%s'", b.unit)
	default:
		l.Period = unitLength[l.Unit]
		if b.multNode != nil {
			if b.mult < 1 {
				return Limit{}, p.errf(b.multNode, "unit_multiplier must be at least 1")
			}
			l.Period *= time.Duration(b.mult)
		}
	}
	if b.burstNode != nil {
		if l.Algorithm != GCRA {
			return Limit{}, p.errf(b.burstNode, "burst needs algorithm: gcra (the %s algorithm has no burst)", l.Algorithm)
		}
		l.Burst = int(b.burst)
	}
	if err := p.checkLimit(*l, orNode(b.periodNode, b.multNode, b.unitNode, b.n)); err != nil {
		return Limit{}, err
	}
	l.Proto = &rlspb.RateLimitResponse_RateLimit{Name: l.Name, RequestsPerUnit: l.RequestsPerUnit, Unit: l.Unit}
	return *l, nil
}

func orNode(ns ...*yaml.Node) *yaml.Node {
	for _, n := range ns {
		if n != nil {
			return n
		}
	}
	return nil
}

// checkLimit refuses a limit ratekit cannot count.
func (p *parser) checkLimit(l Limit, at *yaml.Node) error {
	if l.Period > core.MaxPeriod {
		return p.errf(at, "a window of %v is longer than %v", l.Period, core.MaxPeriod)
	}
	if l.Period%time.Millisecond != 0 {
		return p.errf(at, "period %v is not a whole number of milliseconds", l.Period)
	}
	if l.Algorithm == Compatible {
		if l.Period%time.Second != 0 {
			return p.errf(at, "a window counted as envoy counts is a whole number of seconds, not %v", l.Period)
		}
		if l.RequestsPerUnit > core.MaxRate {
			return p.errf(at, "requests_per_unit %d is above %d, the most ratekit counts in a window", l.RequestsPerUnit, core.MaxRate)
		}
		return nil
	}
	if err := l.Core().Validate(); err != nil {
		return p.errf(at, "%s", strings.TrimPrefix(err.Error(), "ratekit: "))
	}
	return nil
}
