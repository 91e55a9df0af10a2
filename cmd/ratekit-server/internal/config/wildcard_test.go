package config_test

import (
	"strings"
	"testing"
)

// TestWildcardsAnywhere: a * anywhere in a value matches any run of
// characters, even none, as in envoy's service since its #1085; a value
// matches exactly first, then by the level's wildcards in file order (the
// first that matches, however specific a later one), then by the key
// alone.
func TestWildcardsAnywhere(t *testing.T) {
	d := load(t, `
domain: d
descriptors:
  - key: path
    value: /api/v1/users
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: /api/*/users
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: "*/admin"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value: /a*b*c
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: path
    value: /api/v2/*
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 6}
  - key: host
    value: ab*ba
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: tenant
    value: "*-eu"
    share_threshold: true
    descriptors:
      - key: plan
        value: g*d
        rate_limit: {unit: second, requests_per_unit: 8}
`).Domain("d")
	for _, tc := range []struct {
		entries []string
		rpu     uint32 // 0: no match
		stats   string
	}{
		{[]string{"path", "/api/v1/users"}, 1, "d.path_/api/v1/users"}, // exact beats the wildcards
		{[]string{"path", "/api/v3/users"}, 2, "d.path_/api/*/users"},
		{[]string{"path", "/api//users"}, 2, "d.path_/api/*/users"},   // * matches nothing too
		{[]string{"path", "/api/v2/users"}, 2, "d.path_/api/*/users"}, // first in file order, not the most specific
		{[]string{"path", "/api/v2/items"}, 5, "d.path_/api/v2/*"},
		{[]string{"path", "/x/admin"}, 3, "d.path_*/admin"},
		{[]string{"path", "/abc"}, 4, "d.path_/a*b*c"},
		{[]string{"path", "/a-c-b-c"}, 4, "d.path_/a*b*c"},
		{[]string{"path", "/acb"}, 6, "d.path"}, // parts out of order: the key alone
		{[]string{"path", "/other"}, 6, "d.path"},
		{[]string{"host", "abba"}, 7, "d.host_ab*ba"},
		{[]string{"host", "aba"}, 0, ""}, // prefix and suffix may not overlap
		{[]string{"tenant", "acme-eu", "plan", "gold"}, 8, "d.tenant_*-eu.plan_g*d"},
		{[]string{"tenant", "acme-us", "plan", "gold"}, 0, ""},
	} {
		m := d.Match(entries(tc.entries...))
		got, stats := uint32(0), ""
		if m.Rule != nil {
			got, stats = m.Rule.Limits[0].RequestsPerUnit, m.StatsKey
		}
		if got != tc.rpu || stats != tc.stats {
			t.Errorf("%v: %d %q, want %d %q", tc.entries, got, stats, tc.rpu, tc.stats)
		}
	}
	// share_threshold on a wildcard in the middle: every tenant it
	// matches shares one counter
	if m := d.Match(entries("tenant", "acme-eu", "plan", "gold")); strings.Join(m.Share, ",") != "*-eu," {
		t.Errorf("share %q, want the wildcard for the tenant", m.Share)
	}
}
