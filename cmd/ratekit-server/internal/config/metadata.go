package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// A descriptor's metadata is any mapping, which envoy's service decodes
// with its YAML 1.1 parser into a protobuf Struct, without checking its
// keys, and returns in the dynamic metadata of the answers that the
// descriptor passed. metadata reads it as that parser makes it: scalars
// by YAML 1.1's rules (yes is true, 0x10 is 16, a timestamp a string),
// every number a double, keys of a nested mapping written as Go prints
// the value they resolve to. (The YAML reader refuses text that is not
// UTF-8, so every string is.)

// metadata reads a descriptor's metadata: nil for null or an empty
// mapping, as in envoy.
func (p *parser) metadata(pr pair) (*structpb.Struct, error) {
	n := pr.value
	if n.Kind == yaml.ScalarNode && resolve(n).kind == kindNull {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "cannot unmarshal %s into metadata (a mapping)", kindName(n))
	}
	fields, err := p.metaFields(n, true, 0)
	if err != nil || len(fields) == 0 {
		return nil, err
	}
	return &structpb.Struct{Fields: fields}, nil
}

// metaFields reads mapping n of metadata (top: the metadata itself),
// merge keys expanded (a key written in the mapping beats a merged one),
// a key written twice refused as elsewhere in a file.
func (p *parser) metaFields(n *yaml.Node, top bool, depth int) (map[string]*structpb.Value, error) {
	if depth > maxDepth*4 {
		return nil, p.errf(n, "metadata nested too deep")
	}
	fields := make(map[string]*structpb.Value, len(n.Content)/2)
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, err := p.deref(n.Content[i])
		if err != nil {
			return nil, err
		}
		if kn.Kind == yaml.ScalarNode && kn.Value == "<<" && kn.Style == 0 {
			merged = append(merged, n.Content[i+1])
			continue
		}
		k, err := p.metaKey(kn, top)
		if err != nil {
			return nil, err
		}
		if _, dup := fields[k]; dup {
			return nil, p.errf(kn, "key %q given twice in one mapping of metadata", k)
		}
		if fields[k], err = p.metaValue(n.Content[i+1], depth+1); err != nil {
			return nil, err
		}
	}
	for _, m := range merged {
		if err := p.metaMerge(fields, m, top, depth); err != nil {
			return nil, err
		}
	}
	return fields, nil
}

// metaMerge adds to fields the keys it lacks of the mappings that merge
// key value m names.
func (p *parser) metaMerge(fields map[string]*structpb.Value, m *yaml.Node, top bool, depth int) error {
	vn, err := p.deref(m)
	if err != nil {
		return err
	}
	sources, err := p.mergeSources(vn)
	if err != nil {
		return err
	}
	for _, src := range sources {
		if src.Kind != yaml.MappingNode {
			return p.errf(src, "a merge key takes mappings, not %s", kindName(src))
		}
		more, err := p.metaFields(src, top, depth+1)
		if err != nil {
			return err
		}
		for k, v := range more {
			if _, ok := fields[k]; !ok {
				fields[k] = v
			}
		}
	}
	return nil
}

// metaKey returns the key of metadata that scalar kn makes: as written
// at the top (null: ""), as Go prints its value below.
func (p *parser) metaKey(kn *yaml.Node, top bool) (string, error) {
	if kn.Kind != yaml.ScalarNode {
		return "", p.errf(kn, "a key of metadata is %s, not a scalar", kindName(kn))
	}
	s := resolve(kn)
	k := kn.Value
	switch {
	case top && s.kind == kindNull:
		k = ""
	case top:
	case s.kind == kindNull:
		k = "<nil>"
	case s.kind == kindBool:
		k = strconv.FormatBool(s.b)
	case s.kind == kindInt:
		k = strconv.FormatInt(s.i, 10)
	case s.kind == kindUint:
		k = strconv.FormatUint(s.u, 10)
	case s.kind == kindFloat:
		k = fmt.Sprint(floatOf(s.text))
	}
	return k, nil
}

// metaValue reads one value of metadata.
func (p *parser) metaValue(n *yaml.Node, depth int) (*structpb.Value, error) {
	n, err := p.deref(n)
	if err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.MappingNode:
		fields, err := p.metaFields(n, false, depth)
		if err != nil {
			return nil, err
		}
		return structpb.NewStructValue(&structpb.Struct{Fields: fields}), nil
	case yaml.SequenceNode:
		list := &structpb.ListValue{Values: make([]*structpb.Value, 0, len(n.Content))}
		for _, e := range n.Content {
			v, err := p.metaValue(e, depth+1)
			if err != nil {
				return nil, err
			}
			list.Values = append(list.Values, v)
		}
		return structpb.NewListValue(list), nil
	}
	return metaScalar(resolve(n)), nil
}

// metaScalar returns a scalar resolved as s as a Value.
func metaScalar(s scalar) *structpb.Value {
	switch s.kind {
	case kindNull:
		return structpb.NewNullValue()
	case kindBool:
		return structpb.NewBoolValue(s.b)
	case kindInt:
		return structpb.NewNumberValue(float64(s.i))
	case kindUint:
		return structpb.NewNumberValue(float64(s.u))
	case kindFloat:
		return structpb.NewNumberValue(floatOf(s.text))
	}
	return structpb.NewStringValue(s.text)
}

// floatOf is the value of a scalar that resolve found a float.
func floatOf(text string) float64 {
	switch strings.TrimLeft(strings.ToLower(text), "+") {
	case ".nan":
		return math.NaN()
	case ".inf":
		return math.Inf(1)
	case "-.inf":
		return math.Inf(-1)
	}
	f, _ := strconv.ParseFloat(strings.ReplaceAll(text, "_", ""), 64)
	return f
}
