package rls

import (
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// dynamicMetadata is the reply's dynamic_metadata with envoy.response_dynamic_metadata,
// built as the peer builds it (its src/service/ratelimit.go, ratelimitToMetadata; spec
// §9.7): the domain, every descriptor (entries as "key=value", its limit override in the
// proto's text form, its hits_addend), the request's hits_addend when set, and under
// "metadata" the metadata of every matched descriptor that passed (not OVER_LIMIT, not
// unlimited), merged: the first value of a key wins, mappings merge key by key. With no
// matches (a domain that maps to no account) there is no "metadata".
func dynamicMetadata(req *rlsv3.RateLimitRequest, matches []match, replies []reply) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.GetDomain())}
	ds := make([]*structpb.Value, 0, len(req.GetDescriptors()))
	for _, d := range req.GetDescriptors() {
		if d == nil {
			continue
		}
		ds = append(ds, structpb.NewStructValue(descriptorStruct(d)))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: ds})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	passed := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range matches {
		p, v := &matches[i], &replies[i]
		if v.unlimited || v.over || !p.matched || p.replaced || p.rule.Metadata == nil {
			continue
		}
		mergeMetadata(passed, p.rule.Metadata)
	}
	if len(passed.GetFields()) > 0 {
		fields["metadata"] = structpb.NewStructValue(passed)
	}
	return &structpb.Struct{Fields: fields}
}

func descriptorStruct(d *rlcommon.RateLimitDescriptor) *structpb.Struct {
	entries := make([]*structpb.Value, 0, len(d.GetEntries()))
	for _, e := range d.GetEntries() {
		entries = append(entries, structpb.NewStringValue(e.GetKey()+"="+e.GetValue()))
	}
	f := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
	if l := d.GetLimit(); l != nil {
		f["limit"] = structpb.NewStringValue(l.String())
	}
	if h := d.GetHitsAddend(); h != nil {
		f["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
	}
	return &structpb.Struct{Fields: f}
}

// mergeMetadata adds src's keys that dst lacks, and merges mappings present in both. It
// copies what it adds, so the configuration's metadata is never modified.
func mergeMetadata(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		have, ok := dst.Fields[k]
		if !ok {
			dst.Fields[k] = proto.Clone(v).(*structpb.Value)
			continue
		}
		if hs, ss := have.GetStructValue(), v.GetStructValue(); hs != nil && ss != nil {
			mergeMetadata(hs, ss)
		}
	}
}
