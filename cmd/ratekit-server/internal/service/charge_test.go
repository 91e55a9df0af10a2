package service_test

import (
	"fmt"
	"testing"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/service"
)

// TestHitsAlwaysLand runs the two-phase pattern of Envoy Gateway and Envoy
// AI Gateway on a budget of 100 a minute: a request-time check (hits_addend
// 0 or 1), then a call with the answer's 70 hits, whose answer the gateway
// ignores; twice, then a third check. envoy's fixed window, which ratekit's
// compatible mode keeps, denies the third check; so does every ratekit
// algorithm with hits_always_land, where without it the second 70 hits
// are denied and spend nothing, and the third check passes.
func TestHitsAlwaysLand(t *testing.T) {
	cases := []struct {
		algorithm string
		land      bool
		want      []rlspb.RateLimitResponse_Code
	}{
		{"", false, overThird},
		{"gcra", true, overThird},
		{"fixed", true, overThird},
		{"sliding-log", true, overThird},
		{"sliding-counter", true, overThird},
		{"gcra", false, []rlspb.RateLimitResponse_Code{ok, ok, ok}},
	}
	for _, c := range cases {
		for _, checkHits := range []uint64{0, 1} {
			name := fmt.Sprintf("%s/land=%v/check=%d", c.algorithm, c.land, checkHits)
			if c.algorithm == "" {
				name = fmt.Sprintf("compatible/check=%d", checkHits)
			}
			t.Run(name, func(t *testing.T) {
				alg := ""
				if c.algorithm != "" {
					alg = ", algorithm: " + c.algorithm
				}
				f := newFixture(t, fmt.Sprintf(`
domain: d
descriptors:
  - key: apikey
    hits_always_land: %v
    rate_limit: {unit: minute, requests_per_unit: 100%s}
`, c.land, alg), service.Options{})
				var got []rlspb.RateLimitResponse_Code
				for i := range 3 {
					check := desc("apikey", "k")
					check.HitsAddend = wrap(checkHits)
					got = append(got, f.call(t, check).OverallCode)
					if i < 2 {
						done := desc("apikey", "k")
						done.HitsAddend = wrap(70)
						f.call(t, done)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("checks answered %v, want %v", got, c.want)
				}
			})
		}
	}
}

const (
	ok   = rlspb.RateLimitResponse_OK
	over = rlspb.RateLimitResponse_OVER_LIMIT
)

var overThird = []rlspb.RateLimitResponse_Code{ok, ok, over}
