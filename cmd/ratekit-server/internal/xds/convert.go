package xds

import (
	"fmt"
	"math"
	"slices"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
)

// MetadataKey is the key of a descriptor's metadata under which xDS
// carries ratekit's own keys, which RateLimitConfig has no field for:
//
//	metadata:
//	  ratekit:
//	    algorithm: gcra            # and burst, period, unit_multiplier:
//	    burst: 20                  # added to the descriptor's rate_limit
//	    period: 90s
//	    limits:                    # the descriptor's limits, as in a file
//	      - {unit: hour, requests_per_unit: 1000, algorithm: sliding-counter}
//
// A descriptor with a period leaves its rate_limit's unit unset. The
// whole metadata, this key included, is the descriptor's metadata as in
// a file, returned in answers as envoy's service returns it.
const MetadataKey = "ratekit"

// rateLimitKeys are ratekit's keys that go in a rate_limit block.
var rateLimitKeys = []string{"algorithm", "burst", "period", "unit_multiplier"}

// File turns one RateLimitConfig into the YAML file envoy's service
// makes of it (its ConfigXdsProtoToYaml), named after the resource, with
// ratekit's keys lifted out of the descriptors' metadata, so a snapshot is
// validated and loaded exactly as a file is.
func File(c *rlsconf.RateLimitConfig) (config.File, error) {
	root := map[string]any{"domain": c.GetDomain()}
	ds, err := descriptors(c.GetDescriptors(), "descriptors")
	if err != nil {
		return config.File{}, fmt.Errorf("RateLimitConfig %q: %w", c.GetName(), err)
	}
	if ds != nil {
		root["descriptors"] = ds
	}
	data, err := yaml.Marshal(root)
	if err != nil {
		return config.File{}, err
	}
	return config.File{Name: "xds:" + c.GetName(), Data: data}, nil
}

func descriptors(pb []*rlsconf.RateLimitDescriptor, path string) ([]any, error) {
	if len(pb) == 0 {
		return nil, nil
	}
	out := make([]any, 0, len(pb))
	for i, d := range pb {
		at := fmt.Sprintf("%s[%d]", path, i)
		m := map[string]any{"key": d.GetKey()}
		if d.GetValue() != "" {
			m["value"] = d.GetValue()
		}
		if p := d.GetRateLimit(); p != nil {
			rl := map[string]any{"unit": p.GetUnit().String(), "requests_per_unit": p.GetRequestsPerUnit()}
			if p.GetUnlimited() {
				rl["unlimited"] = true
			}
			if p.GetName() != "" {
				rl["name"] = p.GetName()
			}
			if len(p.GetReplaces()) > 0 {
				var rs []any
				for _, r := range p.GetReplaces() {
					rs = append(rs, map[string]any{"name": r.GetName()})
				}
				rl["replaces"] = rs
			}
			m["rate_limit"] = rl
		}
		for _, b := range []struct {
			key string
			on  bool
		}{{"shadow_mode", d.GetShadowMode()}, {"detailed_metric", d.GetDetailedMetric()}, {"quota_mode", d.GetQuotaMode()}} {
			if b.on {
				m[b.key] = true
			}
		}
		if err := lift(m, d.GetMetadata(), at); err != nil {
			return nil, err
		}
		if md := d.GetMetadata(); len(md.GetFields()) > 0 {
			m["metadata"] = plain(structpb.NewStructValue(md))
		}
		nested, err := descriptors(d.GetDescriptors(), at+".descriptors")
		if err != nil {
			return nil, err
		}
		if nested != nil {
			m["descriptors"] = nested
		}
		out = append(out, m)
	}
	return out, nil
}

// lift moves ratekit's keys of md into the descriptor m: those of a
// rate_limit block into its rate_limit, limits beside it.
func lift(m map[string]any, md *structpb.Struct, at string) error {
	v, ok := md.GetFields()[MetadataKey]
	if !ok {
		return nil
	}
	rk, ok := plain(v).(map[string]any)
	if !ok {
		return fmt.Errorf("%s: metadata %s is not a mapping", at, MetadataKey)
	}
	for k, v := range rk {
		switch {
		case k == "limits" || k == "hits_always_land":
			m[k] = v
		case slices.Contains(rateLimitKeys, k):
			rl, ok := m["rate_limit"].(map[string]any)
			if !ok {
				return fmt.Errorf("%s: metadata %s.%s without a rate_limit", at, MetadataKey, k)
			}
			rl[k] = v
			if k == "period" && rl["unit"] == rlsconf.RateLimitUnit_UNKNOWN.String() {
				// a period stands for the unit, left unset
				delete(rl, "unit")
			}
		default:
			return fmt.Errorf("%s: metadata %s.%s is none of ratekit's keys (algorithm, burst, period, unit_multiplier, limits, hits_always_land)", at, MetadataKey, k)
		}
	}
	return nil
}

// plain returns v as YAML would read it: whole numbers as integers (a
// Struct holds every number as a double).
func plain(v *structpb.Value) any {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		f := k.NumberValue
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f)
		}
		return f
	case *structpb.Value_StructValue:
		out := map[string]any{}
		for name, f := range k.StructValue.GetFields() {
			out[name] = plain(f)
		}
		return out
	case *structpb.Value_ListValue:
		out := make([]any, 0, len(k.ListValue.GetValues()))
		for _, e := range k.ListValue.GetValues() {
			out = append(out, plain(e))
		}
		return out
	default:
		return v.AsInterface()
	}
}
