package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
)

func load(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, _, err := config.Load([]config.File{{Name: "t.yaml", Data: []byte(yaml)}}, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func entries(kv ...string) []*rlv3.RateLimitDescriptor_Entry {
	var out []*rlv3.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

const tree = `
domain: d
descriptors:
  - key: a
    value: x
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: w
    value: "pre*"
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: w
    value: "p*"
    rate_limit: {unit: day, requests_per_unit: 4}
  - key: n
    descriptors:
      - key: m
        rate_limit: {unit: week, requests_per_unit: 5}
  - key: s
    value: "f*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 6}
`

func TestMatch(t *testing.T) {
	d := load(t, tree).Domain("d")
	for _, tc := range []struct {
		entries []string
		rpu     uint32 // 0: no match
		stats   string
	}{
		{[]string{"a", "x"}, 1, "d.a_x"},
		{[]string{"a", "y"}, 2, "d.a"},
		{[]string{"a", ""}, 2, "d.a"},
		{[]string{"w", "prefix"}, 3, "d.w_pre*"}, // the first wildcard in file order
		{[]string{"w", "pq"}, 4, "d.w_p*"},
		{[]string{"w", "q"}, 0, ""},
		{[]string{"n", "1"}, 0, ""},                // fewer entries than configured
		{[]string{"n", "1", "m", "2"}, 5, "d.n.m"}, // exact depth
		{[]string{"n", "1", "m", "2", "o", "3"}, 0, ""},
		{[]string{"a", "x", "b", "y"}, 0, ""}, // more entries than configured
		{[]string{"s", "foo"}, 6, "d.s_f*"},
		{[]string{"z", "z"}, 0, ""},
	} {
		m := d.Match(entries(tc.entries...))
		got := uint32(0)
		if m.Rule != nil {
			got = m.Rule.Limits[0].RequestsPerUnit
		}
		if got != tc.rpu || m.StatsKey != tc.stats {
			t.Errorf("%v: matched %d (%q), want %d (%q)", tc.entries, got, m.StatsKey, tc.rpu, tc.stats)
		}
	}
	if m := d.Match(entries("s", "foo")); len(m.Share) != 1 || m.Share[0] != "f*" {
		t.Errorf("share_threshold: Share %q, want [f*]", m.Share)
	}
}

func TestErrorsNameFileAndLine(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "t.yaml:4: invalid rate limit unit 'fortnight'"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limitt: {}\n", "t.yaml:4: config error, unknown key 'rate_limitt'"},
		{"domain: d\ndescriptors:\n  - key: k\n  - key: k\n", "t.yaml:4: duplicate descriptor composite key 'd.k'"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 3}\n", "t.yaml:4: burst needs algorithm: gcra"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n    limits: [{unit: hour, requests_per_unit: 100}]\n", "several limits on one descriptor"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {period: 1500ms, requests_per_unit: 5}\n", "t.yaml:4: a window counted as envoy counts is a whole number of seconds"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {period: 2s, unit: second, requests_per_unit: 5}\n", "period replaces unit"},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 0, algorithm: gcra}\n", "rate 0 out of range"},
		{"domain: d\ndescriptors:\n  - key: k\n    algorithm: gcra\n", "belongs in a rate_limit"},
	} {
		_, _, err := config.Load([]config.File{{Name: "t.yaml", Data: []byte(tc.yaml)}}, config.Options{})
		var ce *config.Error
		if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.yaml, err, tc.want)
		}
	}
}

func TestRatekitKeys(t *testing.T) {
	c := load(t, `
domain: d
descriptors:
  - key: g
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 20}
    limits:
      - {unit: hour, requests_per_unit: 1000, name: hourly}
      - {period: 90s, requests_per_unit: 50, algorithm: sliding-counter}
  - key: m
    rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 7}
`)
	g := c.Domain("d").Match(entries("g", "1")).Rule
	if len(g.Limits) != 3 {
		t.Fatalf("%d limits", len(g.Limits))
	}
	if l := g.Limits[0]; l.Algorithm != config.GCRA || l.Burst != 20 || l.Period != time.Second {
		t.Errorf("first limit %+v", l)
	}
	if l := g.Limits[1]; l.Algorithm != config.GCRA || l.Name != "hourly" || l.Period != time.Hour {
		t.Errorf("second limit %+v (inherits gcra)", l)
	}
	if l := g.Limits[2]; l.Algorithm != config.SlidingCounter || l.Period != 90*time.Second || l.Unit != rlspb.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("third limit %+v", l)
	}
	m := c.Domain("d").Match(entries("m", "1")).Rule.Limits[0]
	if m.Algorithm != config.Compatible || m.Period != 5*time.Minute || m.Unit != rlspb.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("unit_multiplier: %+v", m)
	}
	def, _, err := config.Load([]config.File{{Name: "t.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")}}, config.Options{DefaultAlgorithm: config.GCRA})
	if err != nil || def.Domain("d").Match(entries("k", "")).Rule.Limits[0].Algorithm != config.GCRA {
		t.Errorf("RATEKIT_ALGORITHM's default not applied: %v", err)
	}
}

func TestMergeDomains(t *testing.T) {
	files := []config.File{
		{Name: "a.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n")},
		{Name: "b.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 2}\n")},
	}
	if _, _, err := config.Load(files, config.Options{}); err == nil || !strings.Contains(err.Error(), "b.yaml:1: duplicate domain 'd'") {
		t.Errorf("two files of one domain: %v", err)
	}
	c, _, err := config.Load(files, config.Options{MergeDomains: true})
	if err != nil || c.Domain("d").Match(entries("b", "")).Rule == nil || c.Domain("d").Match(entries("a", "")).Rule == nil {
		t.Errorf("MERGE_DOMAIN_CONFIG: %v", err)
	}
}

// TestDomains lists each domain with the file and line it was written
// at (both files of a merged domain) and its count of rules.
func TestDomains(t *testing.T) {
	files := []config.File{
		{Name: "a.yaml", Data: []byte("# a\ndomain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: u\n    rate_limit: {unlimited: true}\n")},
		{Name: "b.yaml", Data: []byte("descriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 2}\n    descriptors:\n      - key: c\n        rate_limit: {unit: minute, requests_per_unit: 3}\ndomain: d\n")},
		{Name: "c.yaml", Data: []byte("domain: c\n")},
	}
	c, _, err := config.Load(files, config.Options{MergeDomains: true})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.Domains())
	want := "[{c [{c.yaml 1}] 0} {d [{a.yaml 2} {b.yaml 7}] 4}]"
	if got != want {
		t.Errorf("Domains() = %s, want %s", got, want)
	}
}

// TestYAMLBomb refuses a document whose aliases expand exponentially
// (10^29 descriptors) once the walk has visited a bounded number of
// nodes, instead of expanding it.
func TestYAMLBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - key: l0\n    descriptors: &a0 [{key: leaf}]\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "  - key: l%d\n    descriptors: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{key: k%d, descriptors: *a%d}", j, i-1)
		}
		b.WriteString("]\n")
	}
	_, _, err := config.Load([]config.File{{Name: "bomb.yaml", Data: []byte(b.String())}}, config.Options{})
	if err == nil || !strings.Contains(err.Error(), "excessive aliasing") {
		t.Fatalf("a YAML bomb: %v", err)
	}
}

// TestManyDescriptors loads a file of 100,000 descriptors.
func TestManyDescriptors(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: big\ndescriptors:\n")
	for i := range 100_000 {
		fmt.Fprintf(&b, "  - key: k\n    value: v%d\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", i, i%1000+1)
	}
	c := load(t, b.String())
	if c.Rules() != 100_000 {
		t.Fatalf("%d rules", c.Rules())
	}
	if m := c.Domain("big").Match(entries("k", "v99999")); m.Rule == nil || m.Rule.Limits[0].RequestsPerUnit != 1000 {
		t.Fatalf("last descriptor: %+v", m.Rule)
	}
}
