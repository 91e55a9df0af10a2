package service

import (
	"fmt"
	"maps"
	"strings"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// metadata is envoy's dynamic metadata of an answer
// (RESPONSE_DYNAMIC_METADATA): the domain, the descriptors, the request's
// hits_addend, the indexes of the descriptors quota_mode let through, and
// whether any limit was in quota mode; and, as envoy's service has it
// since it reads descriptor metadata, under "metadata", that of the rules
// of the descriptors that passed, merged (passed: the indexes of ds).
func metadata(req *rlspb.RateLimitRequest, violations []int, ds []descriptor, passed []int) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.GetDomain())}
	descs := make([]*structpb.Value, 0, len(req.GetDescriptors()))
	for _, d := range req.GetDescriptors() {
		if d == nil {
			continue
		}
		f := map[string]*structpb.Value{}
		entries := make([]*structpb.Value, 0, len(d.GetEntries()))
		for _, e := range d.GetEntries() {
			entries = append(entries, structpb.NewStringValue(fmt.Sprintf("%s=%s", e.GetKey(), e.GetValue())))
		}
		f["entries"] = structpb.NewListValue(&structpb.ListValue{Values: entries})
		if l := d.GetLimit(); l != nil {
			f["limit"] = structpb.NewStringValue(limitText(l))
		}
		if h := d.GetHitsAddend(); h != nil {
			f["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
		}
		descs = append(descs, structpb.NewStructValue(&structpb.Struct{Fields: f}))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	if len(violations) > 0 {
		vs := make([]*structpb.Value, len(violations))
		for i, v := range violations {
			vs[i] = structpb.NewNumberValue(float64(v))
		}
		fields["quotaModeViolations"] = structpb.NewListValue(&structpb.ListValue{Values: vs})
	}
	quota := false
	for i := range ds {
		if r := ds[i].rule; r != nil && r.QuotaMode && !ds[i].override {
			quota = true
		}
	}
	fields["quotaModeEnabled"] = structpb.NewBoolValue(quota)
	if md := passedMetadata(ds, passed); md != nil {
		fields["metadata"] = structpb.NewStructValue(md)
	}
	return &structpb.Struct{Fields: fields}
}

// passedMetadata merges the metadata of the rules of the descriptors of
// ds at passed, in that order, as envoy merges them: a key already there
// stays, unless both are mappings, which are merged in turn. Nil when
// none has any.
func passedMetadata(ds []descriptor, passed []int) *structpb.Struct {
	var out map[string]*structpb.Value
	for _, i := range passed {
		if r := ds[i].rule; r != nil && len(r.Metadata.GetFields()) > 0 {
			if out == nil {
				out = make(map[string]*structpb.Value, len(r.Metadata.GetFields()))
			}
			mergeMetadata(out, r.Metadata.GetFields())
		}
	}
	if out == nil {
		return nil
	}
	return &structpb.Struct{Fields: out}
}

// mergeMetadata merges src into dst. The values of src belong to the
// configuration and are shared by every answer: a mapping of dst that
// takes more keys is copied first, never written to.
func mergeMetadata(dst, src map[string]*structpb.Value) {
	for k, v := range src {
		old, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		a, b := old.GetStructValue(), v.GetStructValue()
		if a == nil || b == nil {
			continue
		}
		merged := make(map[string]*structpb.Value, len(a.GetFields())+len(b.GetFields()))
		maps.Copy(merged, a.GetFields())
		mergeMetadata(merged, b.GetFields())
		dst[k] = structpb.NewStructValue(&structpb.Struct{Fields: merged})
	}
}

// RuleMetadataKey is the key of an answer's dynamic metadata under which
// Options.RuleMetadata names the rule that decided it: Envoy keeps the
// dynamic metadata under envoy.filters.http.ratelimit, where its access
// log reads it as %DYNAMIC_METADATA(envoy.filters.http.ratelimit:ratekit:rule)%.
const RuleMetadataKey = "ratekit"

// addRule adds to resp's dynamic metadata, under RuleMetadataKey, the
// rule that decided it, as Decide picks it (a denial first, then a
// shadow rule's denial, then the rule with the least left): "rule", its
// name as Decide names it, "remaining", what it has left, and "shadow",
// true when it was over its limit and let through (shadow_mode,
// quota_mode, SHADOW_MODE). An answer no limit applied to has none.
func addRule(resp *rlspb.RateLimitResponse, ds []descriptor) {
	dec := decision(resp, ds)
	if dec.Limiting < 0 {
		return
	}
	r := dec.Results[dec.Limiting]
	f := map[string]*structpb.Value{
		"rule":      structpb.NewStringValue(r.Rule),
		"remaining": structpb.NewNumberValue(float64(max(r.Remaining, 0))),
	}
	if r.Shadow {
		f["shadow"] = structpb.NewBoolValue(true)
	}
	if resp.DynamicMetadata == nil {
		resp.DynamicMetadata = &structpb.Struct{Fields: make(map[string]*structpb.Value, 1)}
	}
	resp.DynamicMetadata.Fields[RuleMetadataKey] = structpb.NewStructValue(&structpb.Struct{Fields: f})
}

// limitText writes a descriptor's limit as envoy's metadata does, the
// message in the protobuf text format on one line, with one space between
// fields (the protobuf library varies its spacing from build to build).
func limitText(l *rlv3.RateLimitDescriptor_RateLimitOverride) string {
	var parts []string
	if n := l.GetRequestsPerUnit(); n != 0 {
		parts = append(parts, fmt.Sprintf("requests_per_unit:%d", n))
	}
	if u := l.GetUnit(); u != 0 {
		parts = append(parts, "unit:"+u.String())
	}
	return strings.Join(parts, " ")
}
