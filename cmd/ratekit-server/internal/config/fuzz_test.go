package config_test

import (
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/core"
)

// FuzzLoad loads any bytes as a file: never a panic or a hang, and every
// limit of a file that loads is one ratekit can count. The seed corpus is
// in testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(tree))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    value: \"*x*\"\n    share_threshold: true\n" +
		"    rate_limit: {unit: second, requests_per_unit: 1}\n    metadata: &m {k: [1, yes, ~, {1: 0x10}], <<: {j: .inf}}\n" +
		"  - key: b\n    metadata: *m\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := config.Load([]config.File{{Name: "f.yaml", Data: data}}, config.Options{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("an error that names no file: %v", err)
			}
			return
		}
		_ = c.Dump()
		for _, name := range []string{"d", "", "x"} {
			if d := c.Domain(name); d != nil {
				m := d.Match([]*rlv3.RateLimitDescriptor_Entry{{Key: "a", Value: "x"}, {Key: "b"}})
				if m.Rule != nil && !m.Rule.Unlimited {
					checkLimits(t, m.Rule)
				}
				if m.Rule != nil {
					if _, err := proto.Marshal(m.Rule.Metadata); err != nil {
						t.Fatalf("metadata that no answer can carry: %v", err)
					}
				}
			}
		}
	})
}

func checkLimits(t *testing.T, r *config.Rule) {
	for _, l := range r.Limits {
		if l.Algorithm == config.Compatible {
			if l.Period%time.Second != 0 || l.Period <= 0 || l.RequestsPerUnit > core.MaxRate {
				t.Fatalf("a compatible limit ratekit cannot count: %+v", l)
			}
			continue
		}
		if err := l.Core().Validate(); err != nil {
			t.Fatalf("limit %+v: %v", l, err)
		}
	}
}
