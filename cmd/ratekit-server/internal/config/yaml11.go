package config

import (
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Envoy's rate limit service reads its files with a YAML 1.1 parser, where
// "yes", "on" and "off" are booleans and "0x1F" is an integer. The parser
// here keeps positions (yaml/v3 nodes) and resolves plain scalars by the
// YAML 1.1 rules below, so that a file means what it meant to envoy.

// scalarKind is what a scalar resolves to.
type scalarKind uint8

const (
	kindStr scalarKind = iota
	kindNull
	kindBool
	kindInt  // fits an int64
	kindUint // an integer above the int64 range
	kindFloat
)

func (k scalarKind) String() string {
	return [...]string{"string", "null", "bool", "int", "int", "float"}[k]
}

// scalar is one resolved scalar.
type scalar struct {
	kind scalarKind
	text string // the scalar's text as written (unquoted)
	b    bool
	i    int64
	u    uint64
}

var yaml11Bool = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true,
	"true": true, "True": true, "TRUE": true,
	"on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false,
	"false": false, "False": false, "FALSE": false,
	"off": false, "Off": false, "OFF": false,
}

var yaml11Special = map[string]scalarKind{
	"": kindNull, "~": kindNull, "null": kindNull, "Null": kindNull, "NULL": kindNull,
	".nan": kindFloat, ".NaN": kindFloat, ".NAN": kindFloat,
	".inf": kindFloat, ".Inf": kindFloat, ".INF": kindFloat,
	"+.inf": kindFloat, "+.Inf": kindFloat, "+.INF": kindFloat,
	"-.inf": kindFloat, "-.Inf": kindFloat, "-.INF": kindFloat,
}

var yaml11Float = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// resolve resolves scalar node n by YAML 1.1's rules: quoted scalars and
// those tagged !!str are strings; plain ones may be null, a bool, an
// integer (decimal, 0x, 0o, 0b, leading-zero octal, with underscores) or a
// float. A timestamp stays a string, as envoy's parser hands it to it.
func resolve(n *yaml.Node) scalar {
	s := scalar{kind: kindStr, text: n.Value}
	if k, ok := styleKind(n); ok {
		s.kind = k
		return s
	}
	in := n.Value
	if b, ok := yaml11Bool[in]; ok {
		s.kind, s.b = kindBool, b
		return s
	}
	if k, ok := yaml11Special[in]; ok {
		s.kind = k
		return s
	}
	if in == "" {
		return s
	}
	s.number(in)
	return s
}

// styleKind returns the kind that n's style or tag decides, if they
// decide one: a quoted or block scalar, or one tagged !!str, !!binary or
// !!timestamp, is a string; one tagged !!null is null.
func styleKind(n *yaml.Node) (scalarKind, bool) {
	if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return kindStr, true
	}
	if n.Style&yaml.TaggedStyle != 0 {
		switch n.Tag {
		case "!!str", "!!binary", "!!timestamp":
			return kindStr, true
		case "!!null":
			return kindNull, true
		}
	}
	return 0, false
}

// number resolves plain scalar in, which is not empty, null or a bool, as
// an integer or a float when it is one; s stays a string otherwise.
func (s *scalar) number(in string) {
	switch c := in[0]; {
	case c == '.':
		if _, err := strconv.ParseFloat(in, 64); err == nil {
			s.kind = kindFloat
		}
		return
	case c == '+' || c == '-' || c >= '0' && c <= '9':
	default:
		return
	}
	plain := strings.ReplaceAll(in, "_", "")
	if v, err := strconv.ParseInt(plain, 0, 64); err == nil {
		s.kind, s.i = kindInt, v
		return
	}
	if v, err := strconv.ParseUint(plain, 0, 64); err == nil {
		s.kind, s.u = kindUint, v
		return
	}
	if yaml11Float.MatchString(plain) {
		if _, err := strconv.ParseFloat(plain, 64); err == nil {
			s.kind = kindFloat
			return
		}
	}
	s.binary(plain)
}

// binary resolves plain, underscores removed, as YAML 1.1's binary
// integer (0b..., or -0b... within the int64 range) when it is one.
func (s *scalar) binary(plain string) {
	if rest, ok := strings.CutPrefix(plain, "0b"); ok {
		if v, err := strconv.ParseInt(rest, 2, 64); err == nil {
			s.kind, s.i = kindInt, v
		} else if v, err := strconv.ParseUint(rest, 2, 64); err == nil {
			s.kind, s.u = kindUint, v
		}
	} else if rest, ok := strings.CutPrefix(plain, "-0b"); ok {
		if v, err := strconv.ParseInt("-"+rest, 2, 64); err == nil {
			s.kind, s.i = kindInt, v
		}
	}
}

// uint32Of returns the scalar as a uint32, as envoy's parser decodes one:
// an integer in range, or a whole float in range.
func (s scalar) uint32Of() (uint32, bool) {
	switch s.kind {
	case kindInt:
		if s.i >= 0 && s.i <= math.MaxUint32 {
			return uint32(s.i), true
		}
	case kindUint:
		if s.u <= math.MaxUint32 {
			return uint32(s.u), true
		}
	case kindFloat:
		f, err := strconv.ParseFloat(strings.ReplaceAll(s.text, "_", ""), 64)
		if err == nil && f >= 0 && f <= math.MaxUint32 && f == math.Trunc(f) {
			return uint32(f), true
		}
	}
	return 0, false
}
