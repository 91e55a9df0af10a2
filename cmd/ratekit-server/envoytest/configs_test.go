package envoytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
)

// configCases are files that envoy accepts or refuses; ratekit must agree,
// except where it refuses on purpose what envoy ignores (stricter).
var configCases = []struct {
	name, yaml string
	stricter   bool // envoy accepts, ratekit refuses on purpose
}{
	{"minimal", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n", false},
	{"all-units", "domain: d\ndescriptors:\n" + units(), false},
	{"upper-unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: MINUTE, requests_per_unit: 1}\n", false},
	{"bad-unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", false},
	{"no-unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n", false},
	{"unlimited", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true}\n", false},
	{"unlimited-with-unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n", false},
	{"empty-domain", "domain: \"\"\ndescriptors: []\n", false},
	{"no-domain", "descriptors:\n  - key: k\n", false},
	{"empty-file", "", false},
	{"only-comment", "# nothing\n", false},
	{"empty-key", "domain: d\ndescriptors:\n  - value: v\n", false},
	{"unknown-key", "domain: d\ndescriptors:\n  - key: k\n    ratelimit: {unit: second}\n", false},
	{"unknown-top", "domain: d\nfoo: 1\n", false},
	{"duplicate-descriptor", "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n", false},
	{"collide-underscore", "domain: d\ndescriptors:\n  - key: a_b\n    value: c\n  - key: a\n    value: b_c\n", false},
	{"yes-bool", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: yes\n    rate_limit: {unit: second, requests_per_unit: 1}\n", false},
	{"on-bool", "domain: d\ndescriptors:\n  - key: k\n    quota_mode: on\n    rate_limit: {unit: second, requests_per_unit: 1}\n", false},
	{"int-bool", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: 1\n", false},
	{"string-rpu", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: \"5\"}\n", false},
	{"hex-rpu", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 0x10}\n", false},
	{"underscore-rpu", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1_000}\n", false},
	{"negative-rpu", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", false},
	{"huge-rpu", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n", false},
	{"float-value", "domain: d\ndescriptors:\n  - key: k\n    value: 1.5\n", false},
	{"int-value", "domain: d\ndescriptors:\n  - key: k\n    value: 42\n    rate_limit: {unit: second, requests_per_unit: 1}\n", false},
	{"bool-value", "domain: d\ndescriptors:\n  - key: k\n    value: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n", false},
	{"date-value", "domain: d\ndescriptors:\n  - key: k\n    value: 2024-01-02\n    rate_limit: {unit: second, requests_per_unit: 1}\n", false},
	{"null-value", "domain: d\ndescriptors:\n  - key: k\n    value: ~\n    rate_limit: {unit: second, requests_per_unit: 1}\n", false},
	{"list-of-strings", "domain: d\ndescriptors:\n  - key\n", false},
	{"map-as-key", "domain: d\ndescriptors:\n  - key: {name: x}\n", false},
	{"int-key", "domain: d\ndescriptors:\n  - 1: x\n", false},
	{"replaces", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: a}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: a}]}\n", false},
	{"replaces-empty", "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: \"\"}]}\n", false},
	{"replaces-self", "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1, name: b, replaces: [{name: b}]}\n", false},
	{"share-no-wildcard", "domain: d\ndescriptors:\n  - key: b\n    value: x\n    share_threshold: true\n", false},
	{"share-wildcard", "domain: d\ndescriptors:\n  - key: b\n    value: x*\n    share_threshold: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n", false},
	{"nested", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        descriptors:\n          - key: c\n            rate_limit: {unit: day, requests_per_unit: 9}\n", false},
	{"anchors", "domain: d\nx: &l {unit: second, requests_per_unit: 1}\n", false},
	{"alias", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &l {unit: second, requests_per_unit: 1}\n  - key: b\n    rate_limit: *l\n", false},
	{"merge", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &l {unit: second, requests_per_unit: 1}\n  - key: b\n    rate_limit:\n      <<: *l\n      requests_per_unit: 2\n", true},
	{"misplaced-envoy-key", "domain: d\ndescriptors:\n  - key: a\n    unit: second\n    rate_limit: {unit: second, requests_per_unit: 1}\n", false},
	{"syntax-error", "domain: d\ndescriptors:\n  - key: [\n", false},
	{"tabs", "domain: d\ndescriptors:\n\t- key: a\n", false},
	{"root-list", "- domain: d\n", false},
	{"root-scalar", "hello\n", false},
	{"duplicate-key", "domain: d\ndomain: e\n", true},
	{"two-documents", "domain: d\n---\ndomain: e\n", true},
}

func units() string {
	var b strings.Builder
	for _, u := range []string{"second", "minute", "hour", "day", "week", "month", "year"} {
		b.WriteString("  - key: " + u + "\n    rate_limit: {unit: " + u + ", requests_per_unit: 1}\n")
	}
	return b.String()
}

// TestConfigsAgree loads each case with envoy's own config checker and
// with ratekit's loader: both accept it or both refuse it.
func TestConfigsAgree(t *testing.T) {
	for _, c := range configCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bins.EnvoyCheck, "-config_dir", dir).CombinedOutput()
			envoyOK := err == nil
			_, _, rerr := config.Load([]config.File{{Name: "c.yaml", Data: []byte(c.yaml)}}, config.Options{})
			ratekitOK := rerr == nil
			t.Logf("envoy ok %v, ratekit ok %v (%v)", envoyOK, ratekitOK, rerr)
			switch {
			case c.stricter && envoyOK && !ratekitOK:
				t.Logf("refused on purpose: %v", rerr)
			case envoyOK != ratekitOK:
				t.Fatalf("envoy accepts: %v (%s); ratekit accepts: %v (%v)", envoyOK, lastLine(out), ratekitOK, rerr)
			}
		})
	}
}

func lastLine(b []byte) string {
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	return l[len(l)-1]
}
