package config_test

import (
	"strings"
	"testing"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
)

// TestHitsAlwaysLand: ratekit's hits_always_land is read per descriptor,
// off by default, and a value that is no boolean is refused with its line.
func TestHitsAlwaysLand(t *testing.T) {
	c := load(t, `
domain: d
descriptors:
  - key: tokens
    hits_always_land: true
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: gcra}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: gcra}
`)
	if r := c.Domain("d").Match(entries("tokens", "")).Rule; r == nil || !r.HitsAlwaysLand {
		t.Fatalf("hits_always_land: true not read: %+v", r)
	}
	if r := c.Domain("d").Match(entries("plain", "")).Rule; r == nil || r.HitsAlwaysLand {
		t.Fatalf("hits_always_land is on by default: %+v", r)
	}
	_, _, err := config.Load([]config.File{{Name: "t.yaml", Data: []byte(
		"domain: d\ndescriptors:\n  - key: k\n    hits_always_land: sometimes\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")}}, config.Options{})
	if err == nil || !strings.Contains(err.Error(), "t.yaml:4") {
		t.Fatalf("hits_always_land: sometimes: %v, want an error at t.yaml:4", err)
	}
}
