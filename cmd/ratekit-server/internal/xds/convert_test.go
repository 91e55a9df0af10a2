package xds_test

import (
	"strings"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/xds"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/xdstest"
)

func load(t *testing.T, cs ...*rlsconf.RateLimitConfig) (*config.Config, error) {
	t.Helper()
	var files []config.File
	for _, c := range cs {
		f, err := xds.File(c)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	c, _, err := config.Load(files, config.Options{})
	return c, err
}

// TestEnvoyGatewaySnapshotLoadsAsItsFile: a snapshot of Envoy Gateway's
// shape loads to the configuration of the YAML file envoy's service
// makes of it.
func TestEnvoyGatewaySnapshotLoadsAsItsFile(t *testing.T) {
	c, err := load(t, xdstest.EnvoyGateway(2, 3)[0])
	if err != nil {
		t.Fatal(err)
	}
	file := `domain: default/eg/http
descriptors:
  - key: ` + xdstest.Route + `
    value: ` + xdstest.Route + `
    rate_limit: null
    descriptors:
      - key: rule-0-match-0
        value: ""
        rate_limit: {requests_per_unit: 2, unit: MINUTE, unlimited: false, name: "", replaces: []}
        descriptors: []
        shadow_mode: false
        detailed_metric: false
      - key: masked_remote_address
        value: 10.0.0.0/8
        rate_limit: {requests_per_unit: 3, unit: MINUTE}
        descriptors:
          - key: rule-1-match-0
            value: GET
            rate_limit: {requests_per_unit: 30, unit: HOUR}
`
	want, _, err := config.Load([]config.File{{Name: "f.yaml", Data: []byte(file)}}, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Dump() != want.Dump() || c.Rules() != 3 {
		t.Fatalf("from xDS:\n%s\nfrom the file:\n%s", c.Dump(), want.Dump())
	}
}

// TestRatekitKeysInMetadata: ratekit's keys reach a configuration from
// xDS through the descriptor's metadata.
func TestRatekitKeysInMetadata(t *testing.T) {
	md, err := structpb.NewStruct(map[string]any{
		"team": "payments",
		xds.MetadataKey: map[string]any{
			"algorithm": "gcra", "burst": 20, "period": "90s",
			"limits": []any{map[string]any{"unit": "hour", "requests_per_unit": 1000, "algorithm": "sliding-counter"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rc := &rlsconf.RateLimitConfig{Name: "n", Domain: "api", Descriptors: []*rlsconf.RateLimitDescriptor{{
		Key: "user", Metadata: md,
		RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: 10},
	}}}
	c, err := load(t, rc)
	if err != nil {
		t.Fatal(err)
	}
	dump := c.Dump()
	for _, want := range []string{"ratekit: gcra 10 per 1m30s burst 20", "ratekit: sliding-counter 1000 per 1h0m0s"} {
		if !strings.Contains(dump, want) {
			t.Errorf("%q not in\n%s", want, dump)
		}
	}

	bad, _ := structpb.NewStruct(map[string]any{xds.MetadataKey: map[string]any{"algorithm": "leaky"}})
	rc.Descriptors[0].Metadata = bad
	if _, err := load(t, rc); err == nil || !strings.Contains(err.Error(), "leaky") {
		t.Fatalf("an unknown algorithm: %v", err)
	}
	unknown, _ := structpb.NewStruct(map[string]any{xds.MetadataKey: map[string]any{"bucket": 1}})
	rc.Descriptors[0].Metadata = unknown
	if _, err := load(t, rc); err == nil || !strings.Contains(err.Error(), "ratekit.bucket is none of ratekit's keys") {
		t.Fatalf("an unknown key: %v", err)
	}
	noLimit, _ := structpb.NewStruct(map[string]any{xds.MetadataKey: map[string]any{"burst": 3}})
	rc.Descriptors[0].Metadata, rc.Descriptors[0].RateLimit = noLimit, nil
	if _, err := load(t, rc); err == nil || !strings.Contains(err.Error(), "without a rate_limit") {
		t.Fatalf("burst without a limit: %v", err)
	}
}

// TestHitsAlwaysLandInMetadata: a descriptor's hits_always_land reaches a
// configuration from xDS, as it does from a file, and a bad value is refused.
func TestHitsAlwaysLandInMetadata(t *testing.T) {
	md, err := structpb.NewStruct(map[string]any{xds.MetadataKey: map[string]any{"hits_always_land": true}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &rlsconf.RateLimitConfig{Name: "n", Domain: "api", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "tokens", Metadata: md, RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: 100, Unit: rlsconf.RateLimitUnit_MINUTE}},
		{Key: "plain", RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: 100, Unit: rlsconf.RateLimitUnit_MINUTE}},
	}}
	c, err := load(t, rc)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"tokens": true, "plain": false} {
		r := c.Domain("api").Match([]*rlv3.RateLimitDescriptor_Entry{{Key: key}}).Rule
		if r == nil || r.HitsAlwaysLand != want {
			t.Errorf("%s: rule %+v, want hits_always_land %t", key, r, want)
		}
	}
	bad, _ := structpb.NewStruct(map[string]any{xds.MetadataKey: map[string]any{"hits_always_land": "sometimes"}})
	rc.Descriptors[0].Metadata = bad
	if _, err := load(t, rc); err == nil || !strings.Contains(err.Error(), "hits_always_land") {
		t.Fatalf("hits_always_land: sometimes: %v", err)
	}
}

func TestBrokenSnapshotIsRefused(t *testing.T) {
	if _, err := load(t, xdstest.Broken()); err == nil || !strings.Contains(err.Error(), "xds:default/eg/broken") {
		t.Fatalf("%v", err)
	}
}

// TestMetadataFromXDS: a descriptor's metadata from xDS reaches its rule
// whole, ratekit's key included, as envoy's service keeps it, every value
// as the Struct held it: strings that YAML 1.1 would read as something
// else stay strings, numbers stay numbers.
func TestMetadataFromXDS(t *testing.T) {
	in := map[string]any{
		"name": "service_1", "yes": "yes", "hex": "0x10", "under": "1_000", "tilde": "~", "empty": "",
		"date": "2001-12-14", "n": 16, "half": 0.5, "on": true, "none": nil,
		"list":          []any{"y", 1, map[string]any{"k": "off"}},
		xds.MetadataKey: map[string]any{"algorithm": "gcra"},
	}
	md, err := structpb.NewStruct(in)
	if err != nil {
		t.Fatal(err)
	}
	rc := &rlsconf.RateLimitConfig{Name: "c", Domain: "d", Descriptors: []*rlsconf.RateLimitDescriptor{{
		Key: "user", Metadata: md,
		RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: 10, Unit: rlsconf.RateLimitUnit_SECOND},
	}}}
	c, err := load(t, rc)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Domain("d").Match([]*rlv3.RateLimitDescriptor_Entry{{Key: "user", Value: "1"}}).Rule
	if !proto.Equal(r.Metadata, md) {
		t.Fatalf("metadata %v, want %v", r.Metadata, md)
	}
	if r.Limits[0].Algorithm != config.GCRA {
		t.Fatalf("algorithm %v, want gcra lifted from the metadata", r.Limits[0].Algorithm)
	}
}
