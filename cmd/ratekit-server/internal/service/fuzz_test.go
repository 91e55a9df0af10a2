package service_test

import (
	"context"
	"strings"
	"testing"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/service"
)

// FuzzRequest decodes any bytes as a RateLimitRequest, as gRPC would, and
// answers it: never a panic, a status per descriptor, and no key whose
// hash tag a client chose. The seed corpus is in
// testdata/fuzz/FuzzRequest.
func FuzzRequest(f *testing.F) {
	for _, r := range []*rlspb.RateLimitRequest{
		{Domain: "d", Descriptors: nil},
		{Domain: "d", HitsAddend: 3},
	} {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	fx := newFixture(f, `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: w
    value: "a*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra}
    descriptors:
      - key: n
        rate_limit: {unit: hour, requests_per_unit: 2, algorithm: sliding-log}
`, service.Options{Headers: true, LimitHeader: "L", RemainingHeader: "R", ResetHeader: "S", DynamicMetadata: true})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rlspb.RateLimitRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			return
		}
		resp, err := fx.svc.ShouldRateLimit(context.Background(), &req)
		if err != nil {
			return
		}
		if len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
		}
		for _, k := range fx.mr.Keys() {
			if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || !strings.HasSuffix(k, "}") {
				t.Fatalf("key %q", k)
			}
		}
	})
}
