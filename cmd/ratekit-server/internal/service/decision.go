package service

import (
	"context"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratekit/core"
)

// Decide answers req as ShouldRateLimit does, and gives the same answer in
// the library's terms, for a front door that writes the library's headers
// (forward auth): a core.Decision with one result per descriptor that a
// limit applied to, in request order (unmatched, unlimited and replaced
// descriptors have none). Each result is that of the descriptor's deciding
// limit, named by the rule's rate_limit name, or else by its statistics key
// (domain.key_value...), both from the configuration, never from the
// request. A descriptor over its limit that shadow_mode, quota_mode or
// SHADOW_MODE let through is a shadow result.
func (s *Service) Decide(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, core.Decision, error) {
	resp, ds, err := s.run(ctx, req)
	if err != nil {
		s.stats.ServiceError.Inc()
		return nil, core.Decision{Limiting: -1}, err
	}
	return resp, decision(resp, ds), nil
}

func decision(resp *rlspb.RateLimitResponse, ds []descriptor) core.Decision {
	dec := core.Decision{Allowed: resp.GetOverallCode() == rlspb.RateLimitResponse_OK, Limiting: -1}
	for i := range ds {
		d := &ds[i]
		if d.rule == nil || d.unlimited || !d.decided {
			continue
		}
		name := d.rule.Name
		if name == "" {
			name = d.rule.FullKey
		}
		r := core.RuleResult{Rule: name, Result: d.result}
		r.Shadow = !r.Allowed && (dec.Allowed || resp.GetStatuses()[i].GetCode() == rlspb.RateLimitResponse_OK)
		dec.Results = append(dec.Results, r)
	}
	dec.Limiting = core.MostRestrictive(dec.Results)
	return dec
}
