package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestRuleMetadataOverGRPC: with RATEKIT_RULE_METADATA the gRPC answer
// carries, in its dynamic_metadata, the rule that decided it, under
// ratekit.rule, where Envoy's access log reads it
// (%DYNAMIC_METADATA(envoy.filters.http.ratelimit:ratekit:rule)%).
func TestRuleMetadataOverGRPC(t *testing.T) {
	set := testSettings(t, "RATEKIT_RULE_METADATA", "true")
	rules := "domain: m\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 0, name: blocked}\n  - key: free\n    rate_limit: {unit: hour, requests_per_unit: 100}\n"
	if err := os.WriteFile(filepath.Join(set.RuntimeRoot, "rl", "config", "m.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(set, discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	}()
	cc, err := grpc.NewClient(s.Addrs()[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rls := rlspb.NewRateLimitServiceClient(cc)
	for _, tc := range []struct {
		ds   []*rlcommon.RateLimitDescriptor
		code rlspb.RateLimitResponse_Code
		rule string // "": no metadata
	}{
		{[]*rlcommon.RateLimitDescriptor{descriptor("free", "1"), descriptor("user", "7")}, rlspb.RateLimitResponse_OVER_LIMIT, "blocked"},
		{[]*rlcommon.RateLimitDescriptor{descriptor("free", "2")}, rlspb.RateLimitResponse_OK, "m.free"},
		{[]*rlcommon.RateLimitDescriptor{descriptor("other", "3")}, rlspb.RateLimitResponse_OK, ""},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := rls.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "m", Descriptors: tc.ds})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got := resp.GetDynamicMetadata().GetFields()["ratekit"].GetStructValue().GetFields()["rule"].GetStringValue()
		if resp.GetOverallCode() != tc.code || got != tc.rule {
			t.Errorf("%v: %v, rule %q; want %v, rule %q (metadata %v)", tc.ds, resp.GetOverallCode(), got, tc.code, tc.rule, resp.GetDynamicMetadata())
		}
	}
}
