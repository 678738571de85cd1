package rls_test

import (
	"testing"
	"testing/synctest"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leashd/leash/adapter/rls"
	"github.com/leashd/leash/engine/wiring"
)

// The envoyproxy/ratelimit behaviours an operator switches on: global shadow mode,
// quota mode, dynamic metadata, header names (spec §9.7) and the over-limit cache
// (spec §9.13). Each test names the peer's source it mirrors.

const parityConfig = `
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {team: {name: payments, tier: gold}, owner: alice}
  - key: route
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {team: {name: search, region: eu}, cost_center: 42}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
    metadata: {never: shown}
  - key: path
    value: "/api/*"
    rate_limit: {unit: second, requests_per_unit: 2}
`

func descs(ds ...*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Descriptors: ds}
}

// TestGlobalShadowMode mirrors the peer's src/service/ratelimit.go (globalShadowMode): an
// OVER_LIMIT overall code becomes OK, the descriptors keep their OVER_LIMIT status, and
// the request is counted; no Retry-After on the OK reply.
func TestGlobalShadowMode(t *testing.T) {
	h := newHarnessWith(t, scalePlan(), map[string]string{"edge.yaml": parityConfig},
		harnessOptions{adapter: func(o *rls.Options) { o.ShadowMode = true }})
	h.one(desc("user", "a"))
	resp := h.call(descs(desc("user", "a"), desc("route", "r")))
	if resp.OverallCode != ok {
		t.Fatalf("overall = %v, want OK in global shadow mode", resp.OverallCode)
	}
	h.want(resp.Statuses[0], over, 1, minute, 0)
	h.want(resp.Statuses[1], ok, 5, minute, 4)
	if h.globalShadow.Load() != 1 {
		t.Fatalf("global shadow count = %d, want 1", h.globalShadow.Load())
	}
	if hdr := headerMap(resp.ResponseHeadersToAdd); hdr["Retry-After"] != "" || hdr["RateLimit-Remaining"] != "0" {
		t.Fatalf("headers = %v: want the over descriptor's, without Retry-After", hdr)
	}
	// An allowed request is not counted.
	if resp := h.call(descs(desc("route", "r"))); resp.OverallCode != ok || h.globalShadow.Load() != 1 {
		t.Fatalf("allowed: %v, count %d", resp.OverallCode, h.globalShadow.Load())
	}
}

// TestQuotaMode mirrors the peer's src/service/ratelimit.go (failedQuotaDescriptors): the
// overall code is OVER_LIMIT when a descriptor that is not in quota mode is over, or
// when every quota-mode descriptor is; a quota descriptor over its limit keeps its
// OVER_LIMIT status.
func TestQuotaMode(t *testing.T) {
	h := newHarness(t, scalePlan(), map[string]string{"edge.yaml": parityConfig})
	h.one(desc("quota", "q"))
	h.one(desc("quota2", "q"))
	cases := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want rlsv3.RateLimitResponse_Code
	}{
		{"the only quota descriptor is over", descs(desc("quota", "q")), over},
		{"quota over, a plain descriptor allowed: every quota descriptor is over", descs(desc("quota", "q"), desc("route", "x")), over},
		{"quota over, another quota allowed", descs(desc("quota", "q"), desc("quota2", "fresh")), ok},
		{"every quota descriptor over", descs(desc("quota", "q"), desc("quota2", "q")), over},
		{"a plain descriptor over", descs(desc("quota2", "fresh2"), desc("user", "u"), desc("user", "u")), over},
	}
	for _, c := range cases {
		resp := h.call(c.req)
		if resp.OverallCode != c.want {
			t.Errorf("%s: overall %v, want %v (%v)", c.name, resp.OverallCode, c.want, resp.Statuses)
		}
		if resp.Statuses[0].Code == over && resp.OverallCode == ok && headerMap(resp.ResponseHeadersToAdd)["Retry-After"] != "" {
			t.Errorf("%s: Retry-After on an OK reply", c.name)
		}
	}
	// Global quota mode: every descriptor but an unlimited one is a quota descriptor.
	g := newHarnessWith(t, scalePlan(), map[string]string{"edge.yaml": parityConfig},
		harnessOptions{adapter: func(o *rls.Options) { o.QuotaMode = true }})
	g.one(desc("user", "u"))
	if resp := g.call(descs(desc("user", "u"), desc("route", "x"))); resp.OverallCode != ok {
		t.Errorf("global quota, one of two over: %v", resp.OverallCode)
	}
	if resp := g.call(descs(desc("user", "u"), desc("free", "x"))); resp.OverallCode != over {
		t.Errorf("global quota, the only counted descriptor over (the other unlimited): %v", resp.OverallCode)
	}
}

// TestDynamicMetadata mirrors the peer's src/service/ratelimit.go (ratelimitToMetadata):
// the domain, the descriptors, the request's hits_addend, and the merged metadata of the
// descriptors that passed (not the over-limit one, not the unlimited one).
func TestDynamicMetadata(t *testing.T) {
	h := newHarnessWith(t, scalePlan(), map[string]string{"edge.yaml": parityConfig},
		harnessOptions{adapter: func(o *rls.Options) { o.DynamicMetadata = true }})
	if resp := h.one(desc("route", "r")); resp.Code != ok {
		t.Fatal(resp)
	}
	withLimit := desc("user", "b")
	withLimit.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_MINUTE}
	withHits := desc("route", "r")
	withHits.HitsAddend = wrapperspb.UInt64(1)
	h.one(desc("quota", "q"))
	req := &rlsv3.RateLimitRequest{HitsAddend: 1, Descriptors: []*rlcommon.RateLimitDescriptor{
		desc("user", "a"), withHits, desc("free", "f"), desc("quota", "q"), withLimit,
	}}
	resp := h.call(req)
	want := map[string]any{
		"domain": "edge",
		"descriptors": []any{
			map[string]any{"entries": []any{"user=a"}},
			map[string]any{"entries": []any{"route=r"}, "hitsAddend": float64(1)},
			map[string]any{"entries": []any{"free=f"}},
			map[string]any{"entries": []any{"quota=q"}},
			map[string]any{"entries": []any{"user=b"}, "limit": withLimit.Limit.String()},
		},
		"hitsAddend": float64(1),
		// user=a passed first: its keys win; route's team merges key by key.
		"metadata": map[string]any{
			"team":        map[string]any{"name": "payments", "tier": "gold", "region": "eu"},
			"owner":       "alice",
			"cost_center": float64(42),
		},
	}
	got, _ := protojson.Marshal(resp.GetDynamicMetadata())
	wantPB, _ := structpb.NewStruct(want)
	wantJSON, _ := protojson.Marshal(wantPB)
	if gs, ws := mustCanon(t, got), mustCanon(t, wantJSON); gs != ws {
		t.Fatalf("dynamic metadata:\n got %s\nwant %s", gs, ws)
	}
	// The configuration's metadata is not changed by merging.
	resp = h.call(descs(desc("route", "r2")))
	if m := resp.GetDynamicMetadata().AsMap()["metadata"].(map[string]any)["team"].(map[string]any); len(m) != 2 {
		t.Fatalf("route's team after a merge = %v, want its own two keys", m)
	}
	// Off by default.
	if h2 := newHarness(t, scalePlan(), map[string]string{"edge.yaml": parityConfig}); h2.call(descs(desc("route", "r"))).DynamicMetadata != nil {
		t.Fatal("dynamic metadata without response_dynamic_metadata")
	}
}

// mustCanon re-encodes JSON with sorted keys, so two encodings compare as text.
func mustCanon(t *testing.T, b []byte) string {
	t.Helper()
	v := &structpb.Struct{}
	if err := protojson.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
	out, err := protojson.MarshalOptions{}.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var s structpb.Struct
	_ = protojson.Unmarshal(out, &s)
	j, _ := s.MarshalJSON() // encoding/json sorts map keys
	return string(j)
}

// TestHeaderNames mirrors the peer's LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and
// LIMIT_RESET_HEADER settings (src/settings/settings.go).
func TestHeaderNames(t *testing.T) {
	h := newHarnessWith(t, scalePlan(), map[string]string{"edge.yaml": parityConfig},
		harnessOptions{adapter: func(o *rls.Options) {
			o.HeaderNames = rls.HeaderNames{Limit: "X-RL-Limit", Remaining: "X-RL-Remaining", Reset: "X-RL-Reset"}
		}})
	hdr := headerMap(h.call(descs(desc("route", "r"))).ResponseHeadersToAdd)
	if hdr["X-RL-Limit"] != "5" || hdr["X-RL-Remaining"] != "4" || hdr["X-RL-Reset"] == "" || hdr["RateLimit-Limit"] != "" {
		t.Fatalf("headers = %v", hdr)
	}
}

// TestLocalCache mirrors the peer's local cache (src/limiter/base_limiter.go,
// IsOverLimitWithLocalCache): after a counter's first denial a flood of requests for it
// is answered OVER_LIMIT with no store operation, until the moment the store said the
// request could be allowed; the first allowed answer comes within 50 ms of it.
func TestLocalCache(t *testing.T) {
	// In a synctest bubble: the store's and the engine's clocks are the bubble's, so the
	// 50 ms bound is checked in time no load stretches.
	synctest.Test(t, func(t *testing.T) {
		h := newHarnessWith(t, scalePlan(), map[string]string{"edge.yaml": parityConfig},
			harnessOptions{engine: wiring.Options{LocalCacheMaxEntries: 100}, realClock: true, inMemory: true})
		d := desc("path", "/api/flood")
		// Start early in a second, so the window does not turn during the flood.
		for time.Now().UnixMilli()%1000 > 300 {
			time.Sleep(time.Millisecond)
		}
		h.one(d)
		h.one(d)
		first := h.one(d)
		if first.Code != over {
			t.Fatalf("third in the second: %v", first)
		}
		deadline := time.Now().Add(first.GetDurationUntilReset().AsDuration())
		spends := h.store.spends.Load()
		const flood = 300
		for range flood {
			if st := h.one(d); st.Code != over || st.LimitRemaining != 0 {
				t.Fatalf("flood: %v", st)
			}
			if time.Now().After(deadline.Add(-50 * time.Millisecond)) {
				break
			}
		}
		if n := h.store.spends.Load() - spends; n != 0 {
			t.Fatalf("%d store operations during the flood, want 0", n)
		}
		if h.eng.Limits.LocalCacheHits() < 1 {
			t.Fatal("no denial counted as answered from the cache")
		}
		for {
			st := h.one(d)
			if st.Code == ok {
				if late := time.Since(deadline); late > 50*time.Millisecond {
					t.Fatalf("first allowed answer %v after the reset, want within 50 ms", late)
				}
				break
			}
			if time.Since(deadline) > time.Second {
				t.Fatal("still denied a second after the reset")
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// TestDynamicMetadataUnknownDomain: a domain that maps to no account is answered OK for
// every descriptor, and with response_dynamic_metadata the reply still carries the
// peer's dynamic_metadata: the domain and the descriptors (no metadata: nothing matched).
func TestDynamicMetadataUnknownDomain(t *testing.T) {
	h := newHarnessWith(t, scalePlan(), map[string]string{"edge.yaml": parityConfig},
		harnessOptions{adapter: func(o *rls.Options) { o.DynamicMetadata = true }})
	withHits := desc("k", "v")
	withHits.HitsAddend = wrapperspb.UInt64(3)
	resp := h.call(&rlsv3.RateLimitRequest{Domain: "nowhere", HitsAddend: 2, Descriptors: []*rlcommon.RateLimitDescriptor{desc("a", "1", "b", "2"), withHits}})
	if resp.GetOverallCode() != ok {
		t.Fatalf("overall %v", resp.GetOverallCode())
	}
	want, _ := structpb.NewStruct(map[string]any{
		"domain": "nowhere",
		"descriptors": []any{
			map[string]any{"entries": []any{"a=1", "b=2"}},
			map[string]any{"entries": []any{"k=v"}, "hitsAddend": float64(3)},
		},
		"hitsAddend": float64(2),
	})
	got, _ := protojson.Marshal(resp.GetDynamicMetadata())
	wantJSON, _ := protojson.Marshal(want)
	if gs, ws := mustCanon(t, got), mustCanon(t, wantJSON); gs != ws {
		t.Fatalf("dynamic metadata:\n got %s\nwant %s", gs, ws)
	}
}
