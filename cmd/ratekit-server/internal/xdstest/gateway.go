package xdstest

import (
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// Route is the generic_key descriptor Envoy Gateway's translator puts
// first on each rate limited route.
const Route = "httproute/default/backend/rule/0/match/0/www_example_com"

// EnvoyGateway returns RateLimitConfigs shaped as Envoy Gateway's
// translator makes them from BackendTrafficPolicies: a domain per
// listener (named after it), a generic_key descriptor per route, and
// under it a rule's descriptors: a header's value (x-user-id, any value,
// perUser), and a masked_remote_address (a source CIDR). perUser and
// perCIDR are the rules' limits per minute.
func EnvoyGateway(perUser, perCIDR uint32) []*rlsconf.RateLimitConfig {
	rule := func(perUser, perCIDR uint32) []*rlsconf.RateLimitDescriptor {
		return []*rlsconf.RateLimitDescriptor{{
			Key: Route, Value: Route,
			Descriptors: []*rlsconf.RateLimitDescriptor{
				{
					Key: "rule-0-match-0",
					RateLimit: &rlsconf.RateLimitPolicy{
						Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: perUser,
					},
				},
				{
					Key: "masked_remote_address", Value: "10.0.0.0/8",
					RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: perCIDR},
					Descriptors: []*rlsconf.RateLimitDescriptor{{
						Key:       "rule-1-match-0",
						Value:     "GET",
						RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: perCIDR * 10},
					}},
				},
			},
		}}
	}
	return []*rlsconf.RateLimitConfig{
		{Name: "default/eg/http", Domain: "default/eg/http", Descriptors: rule(perUser, perCIDR)},
		{Name: "default/eg/https", Domain: "default/eg/https", Descriptors: rule(perUser*2, perCIDR*2)},
	}
}

// Broken returns a RateLimitConfig that does not load: a limit without a
// valid unit.
func Broken() *rlsconf.RateLimitConfig {
	return &rlsconf.RateLimitConfig{Name: "default/eg/broken", Domain: "default/eg/broken", Descriptors: []*rlsconf.RateLimitDescriptor{{
		Key: "generic_key", Value: "x", RateLimit: &rlsconf.RateLimitPolicy{RequestsPerUnit: 1},
	}}}
}
