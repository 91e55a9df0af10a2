package service_test

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/service"
)

const metadataRules = `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {name: a, tags: {x: a, deep: {p: a}}, list: [a]}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {name: b, tags: {x: b, z: b, deep: {q: b}}, only: b}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 0}
    metadata: {shadow: true}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 0}
    metadata: {quota: true}
  - key: free
    rate_limit: {unlimited: true}
    metadata: {free: true}
`

// TestDescriptorMetadata: with RESPONSE_DYNAMIC_METADATA the answer's
// dynamic metadata holds, under "metadata", that of the rules of the
// descriptors that passed, merged in request order as envoy merges them
// (the first value of a key stays, mappings merge): a descriptor over
// its limit, under quota_mode too, adds none, nor does an unlimited one;
// one over its limit under shadow_mode passed. The configuration's
// metadata is never changed by a merge.
func TestDescriptorMetadata(t *testing.T) {
	f := newFixture(t, metadataRules, service.Options{DynamicMetadata: true})
	f.mr.SetTime(time.Date(2026, 1, 1, 10, 30, 0, 0, time.UTC)) // Redis's clock: one window throughout
	get := func(ds ...[]string) map[string]any {
		t.Helper()
		var in []*rlv3.RateLimitDescriptor
		for _, d := range ds {
			in = append(in, desc(d...))
		}
		return f.call(t, in...).GetDynamicMetadata().GetFields()["metadata"].GetStructValue().AsMap()
	}
	both := get([]string{"a", "1"}, []string{"b", "1"}, []string{"shadow", "1"}, []string{"quota", "1"}, []string{"free", "1"})
	want := `{"deep":{"p":"a","q":"b"},"x":"a","z":"b"}`
	if got := field(both, "tags"); got != want {
		t.Errorf("tags merged: %s, want %s (all: %s)", got, want, both)
	}
	for _, k := range []string{"name", "list", "only", "shadow"} {
		if field(both, k) == "" {
			t.Errorf("%s missing: %s", k, both)
		}
	}
	if field(both, "name") != `"a"` {
		t.Errorf("name: %s, want the first descriptor's", both)
	}
	for _, k := range []string{"quota", "free"} {
		if field(both, k) != "" {
			t.Errorf("%s present: %s", k, both)
		}
	}
	// a is over its limit now: only b's
	if got := get([]string{"a", "1"}, []string{"b", "1"}); field(got, "name") != `"b"` || field(got, "list") != "" {
		t.Errorf("a over its limit: %s, want b's metadata alone", got)
	}
	// the merges left the configuration as it was
	if got := get([]string{"a", "2"}); field(got, "tags") != `{"deep":{"p":"a"},"x":"a"}` {
		t.Errorf("a alone after merges: %s", got)
	}
	if got := get([]string{"none", "1"}); len(got) != 0 {
		t.Errorf("no rule: %s, want no metadata", got)
	}
}

// field is m[k] in JSON, keys sorted; "" when m has no k.
func field(m map[string]any, k string) string {
	v, ok := m[k]
	if !ok {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestRuleMetadata: with RuleMetadata every answer a limit applied to
// names its deciding rule in its dynamic metadata, under "ratekit": the
// denying rule of a denial, else a shadow rule over its limit, else the
// rule with the least left; by its rate_limit name, or else its
// statistics key. It stands beside envoy's dynamic metadata when that is
// on too, and an answer no limit applied to has none.
func TestRuleMetadata(t *testing.T) {
	const rules = `
domain: d
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2, name: per-user}
  - key: route
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 0, name: trial}
`
	for _, envoyToo := range []bool{false, true} {
		f := newFixture(t, rules, service.Options{RuleMetadata: true, DynamicMetadata: envoyToo})
		f.mr.SetTime(time.Date(2026, 1, 1, 10, 30, 0, 0, time.UTC)) // Redis's clock: one window throughout
		rule := func(ds ...*rlv3.RateLimitDescriptor) map[string]any {
			t.Helper()
			resp := f.call(t, ds...)
			if envoyToo != (resp.GetDynamicMetadata().GetFields()["domain"] != nil) {
				t.Fatalf("envoy's metadata %v with RESPONSE_DYNAMIC_METADATA %v", resp.GetDynamicMetadata(), envoyToo)
			}
			return resp.GetDynamicMetadata().GetFields()[service.RuleMetadataKey].GetStructValue().AsMap()
		}
		for i, want := range []map[string]any{
			{"rule": "per-user", "remaining": 1.0},
			{"rule": "per-user", "remaining": 0.0},
		} {
			if got := rule(desc("route", "/a"), desc("user", "7")); !maps.Equal(got, want) {
				t.Errorf("envoy's too %v, call %d: %v, want %v", envoyToo, i, got, want)
			}
		}
		if got, want := rule(desc("route", "/a"), desc("user", "7")), map[string]any{"rule": "per-user", "remaining": 0.0}; !maps.Equal(got, want) {
			t.Errorf("denied: %v, want %v", got, want)
		}
		if got, want := rule(desc("route", "/b"), desc("trial", "x")), map[string]any{"rule": "trial", "remaining": 0.0, "shadow": true}; !maps.Equal(got, want) {
			t.Errorf("shadow: %v, want %v", got, want)
		}
		if got, want := rule(desc("route", "/c")), map[string]any{"rule": "d.route", "remaining": 99.0}; !maps.Equal(got, want) {
			t.Errorf("unnamed: %v, want %v", got, want)
		}
		if resp := f.call(t, desc("none", "1")); len(resp.GetDynamicMetadata().GetFields()[service.RuleMetadataKey].GetStructValue().GetFields()) != 0 {
			t.Errorf("no limit applied: %v", resp.GetDynamicMetadata())
		}
	}
}
