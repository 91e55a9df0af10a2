package config_test

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
)

// TestMetadata: a descriptor's metadata is read into its rule as envoy's
// YAML 1.1 parser decodes it: any mapping, scalars by YAML 1.1's rules,
// numbers as doubles, nested keys as their values print, merge keys
// expanded; null or empty is none.
func TestMetadata(t *testing.T) {
	c := load(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
    metadata:
      name: service_1
      on: yes
      n: 0x10
      f: 1.5
      big: 18446744073709551615
      stamp: 2001-12-14
      quoted: "yes"
      none: ~
      list: [1, two, {three: 3}]
      nested: {1: one, true: t, 2.5: x, ~: nil}
      <<: {name: merged, extra: e}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 1}
    metadata: {}
  - key: c
    rate_limit: {unit: second, requests_per_unit: 1}
    metadata:
`)
	d := c.Domain("d")
	got := d.Match(entries("a", "x")).Rule.Metadata
	want, err := structpb.NewStruct(map[string]any{
		"name": "service_1", "on": true, "n": 16, "f": 1.5, "big": float64(math.MaxUint64),
		"stamp": "2001-12-14", "quoted": "yes", "none": nil,
		"list":   []any{1, "two", map[string]any{"three": 3}},
		"nested": map[string]any{"1": "one", "true": "t", "2.5": "x", "<nil>": "nil"},
		"extra":  "e",
	})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := protojson.Format(got), protojson.Format(want); g != w {
		t.Fatalf("metadata:\n%s\nwant\n%s", g, w)
	}
	for _, k := range []string{"b", "c"} {
		if md := d.Match(entries(k, "x")).Rule.Metadata; md != nil {
			t.Errorf("%s: metadata %v, want none", k, md)
		}
	}
}

// TestMetadataKeys: metadata is a key envoy accepts anywhere, with any
// value; beside no rate_limit, or in a rate_limit, it is a warning; not a
func TestMetadataKeys(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, warn, err string
	}{
		{"no rate_limit", "domain: d\ndescriptors:\n  - key: a\n    metadata: {x: 1}\n", "t.yaml:4: metadata means nothing without a rate_limit", ""},
		{"in rate_limit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, metadata: [1, 2.5]}\n", `"metadata" means nothing in a rate_limit`, ""},
		{"floats and lists", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n    metadata: {x: [1.5, [2]]}\n", "", ""},
		{"a list", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n    metadata: [a]\n", "", "t.yaml:5: cannot unmarshal a list into metadata (a mapping)"},
		{"a string", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n    metadata: x\n", "", "t.yaml:5: cannot unmarshal a string into metadata (a mapping)"},
		{"key twice", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n    metadata: {x: 1, x: 2}\n", "", "given twice"},
		{"a mapping as key", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n    metadata: {x: {? {a: 1} : 2}}\n", "", "a key of metadata is a mapping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, warns, err := config.Load([]config.File{{Name: "t.yaml", Data: []byte(tc.yaml)}}, config.Options{})
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			var ws []string
			for _, w := range warns {
				ws = append(ws, w.Error())
			}
			if all := strings.Join(ws, "\n"); tc.warn != "" && !strings.Contains(all, tc.warn) || tc.warn == "" && all != "" {
				t.Fatalf("warnings %q, want %q", all, tc.warn)
			}
		})
	}
}
