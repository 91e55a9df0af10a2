package service

import (
	"context"
	"fmt"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/compat"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/core"
)

// Quota is what one limit of a descriptor holds now.
type Quota struct {
	Name            string        `json:"name,omitempty"`
	Algorithm       string        `json:"algorithm"`
	RequestsPerUnit uint32        `json:"requests_per_unit"`
	Unit            string        `json:"unit"`
	Period          string        `json:"period"`
	Remaining       int           `json:"remaining"`
	Over            bool          `json:"over_limit"`
	ResetAfter      time.Duration `json:"-"`
	ResetAfterMS    int64         `json:"reset_after_ms"`
}

// ErrNoLimit is returned, wrapped, by Peek and Reset for a descriptor the
// configuration does not limit.
var ErrNoLimit = fmt.Errorf("%w: the descriptor matches no limit", ErrBadRequest)

func (s *Service) target(domain string, entries []*rlv3.RateLimitDescriptor_Entry) (*config.Rule, string, error) {
	cfg := s.cfg.Load()
	if cfg == nil {
		return nil, "", ErrNoConfig
	}
	d := cfg.Domain(domain)
	if d == nil {
		return nil, "", fmt.Errorf("%w: unknown domain %q", ErrNoLimit, domain)
	}
	m := d.Match(entries)
	if m.Rule == nil || m.Rule.Unlimited {
		return nil, "", ErrNoLimit
	}
	return m.Rule, identity(domain, entries, m.Share), nil
}

// Peek reports what each limit of a descriptor holds, without spending.
func (s *Service) Peek(ctx context.Context, domain string, entries []*rlv3.RateLimitDescriptor_Entry) ([]Quota, error) {
	rule, id, err := s.target(domain, entries)
	if err != nil {
		return nil, err
	}
	out := make([]Quota, 0, len(rule.Limits))
	for i, l := range rule.Limits {
		var (
			r   core.Result
			err error
		)
		q := Quota{Name: l.Name, Algorithm: l.Algorithm.String(), RequestsPerUnit: l.RequestsPerUnit, Unit: l.Unit.String(), Period: l.Period.String()}
		switch {
		case l.Algorithm == config.Compatible && l.RequestsPerUnit == 0:
			q.Over = true
			out = append(out, q)
			continue
		case l.Algorithm == config.Compatible:
			r, err = s.compat.Peek(compat.With(ctx, &compat.Call{}), compatRule(l), id)
		default:
			r, err = s.native.Peek(ctx, core.Rule{Name: "rk" + fmt.Sprint(i), Limit: l.Core(), Key: keyOf}, id)
		}
		if err != nil {
			return nil, err
		}
		q.Remaining, q.Over, q.ResetAfter = r.Remaining, !r.Allowed, r.ResetAfter
		q.ResetAfterMS = r.ResetAfter.Milliseconds()
		out = append(out, q)
	}
	return out, nil
}

// Reset clears what a descriptor spent under each of its limits, on every
// replica.
func (s *Service) Reset(ctx context.Context, domain string, entries []*rlv3.RateLimitDescriptor_Entry) error {
	rule, id, err := s.target(domain, entries)
	if err != nil {
		return err
	}
	for i, l := range rule.Limits {
		switch {
		case l.Algorithm == config.Compatible && l.RequestsPerUnit == 0:
		case l.Algorithm == config.Compatible:
			err = s.compat.Reset(ctx, compatRule(l).Name, id)
		default:
			err = s.native.Reset(ctx, "rk"+fmt.Sprint(i), id)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
