package rls_test

import (
	"context"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/engine"
)

// aiConfig is a token budget: 1000 per minute, checked before a request and charged the
// response's token count after it (Envoy's apply_on_stream_done).
const aiConfig = `
domain: ai
descriptors:
  - key: model
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: plain
    overdraft: false
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: bucket
    overdraft: true
    rate_limit: {unit: minute, requests_per_unit: 1000, algorithm: token_bucket}
`

// aiHarness serves aiConfig with domain ai routed to acme and the given overdraft settings.
func aiHarness(t *testing.T, global bool, perDomain map[string]bool) *harness {
	h := newHarness(t, scalePlan(), map[string]string{"ai.yaml": aiConfig})
	h.svc.SetConfig(&domains.Config{Descriptors: h.cfg.Descriptors, Routing: domains.Routing{
		Domains: map[string]string{"ai": "acme"}, Overdraft: global, DomainOverdraft: perDomain}})
	return h
}

// hits sends one descriptor of domain ai with the request's hits_addend.
func (h *harness) hits(key string, n uint32) *rlsv3.RateLimitResponse {
	h.t.Helper()
	return h.call(&rlsv3.RateLimitRequest{Domain: "ai", HitsAddend: n, Descriptors: []*rlcommon.RateLimitDescriptor{desc(key, "gpt")}})
}

// look sends a descriptor-level hits_addend of 0: a check that spends nothing.
func (h *harness) look(key string) *rlsv3.RateLimitResponse {
	h.t.Helper()
	d := desc(key, "gpt")
	d.HitsAddend = wrapperspb.UInt64(0)
	return h.call(&rlsv3.RateLimitRequest{Domain: "ai", Descriptors: []*rlcommon.RateLimitDescriptor{d}})
}

func (h *harness) wantReply(r *rlsv3.RateLimitResponse, code rlsv3.RateLimitResponse_Code, remaining uint32) {
	h.t.Helper()
	if r.GetOverallCode() != code {
		h.t.Errorf("overall_code = %v, want %v (%v)", r.GetOverallCode(), code, r)
	}
	h.want(r.GetStatuses()[0], code, 1000, minute, remaining)
}

// TestOverdraftTokenBudget replays the token-budget sequence (spec §4.12, §9.5): with
// overdraft the charge of 5000 is counted although it is denied, and the budget stays
// spent until the window ends; without it the charge is lost (remaining 998).
func TestOverdraftTokenBudget(t *testing.T) {
	on := func(h *harness, key string) {
		h.t.Helper()
		h.wantReply(h.look(key), ok, 1000) // the check before the request, cost 0
		h.wantReply(h.hits(key, 1), ok, 999)
		h.wantReply(h.hits(key, 5000), over, 0)
		h.wantReply(h.hits(key, 1), over, 0)
		h.wantReply(h.look(key), over, 0)
		h.clock.Advance(59_999 * time.Millisecond)
		h.wantReply(h.hits(key, 1), over, 0)
		h.clock.Advance(time.Millisecond) // the next window
		h.wantReply(h.hits(key, 1), ok, 999)
	}
	off := func(h *harness, key string) {
		h.t.Helper()
		h.wantReply(h.look(key), ok, 1000)
		h.wantReply(h.hits(key, 1), ok, 999)
		h.wantReply(h.hits(key, 5000), over, 0)
		h.wantReply(h.hits(key, 1), ok, 998)
	}
	t.Run("global on", func(t *testing.T) { on(aiHarness(t, true, nil), "model") })
	t.Run("global off", func(t *testing.T) { off(aiHarness(t, false, nil), "model") })
	t.Run("domain on", func(t *testing.T) { on(aiHarness(t, false, map[string]bool{"ai": true}), "model") })
	t.Run("domain off", func(t *testing.T) { off(aiHarness(t, true, map[string]bool{"ai": false}), "model") })
	t.Run("descriptor off", func(t *testing.T) { off(aiHarness(t, true, nil), "plain") })
	t.Run("token bucket descriptor on", func(t *testing.T) {
		h := aiHarness(t, false, nil)
		h.wantReply(h.hits("bucket", 1), ok, 999)
		h.wantReply(h.hits("bucket", 5000), over, 0)
		// In debt: 5001 units at 60 ms each; a look fits once the debt is back to one
		// window (after 300,060 − 60,000 ms), one unit 60 ms later.
		h.clock.Advance(240_059 * time.Millisecond)
		h.wantReply(h.look("bucket"), over, 0)
		h.clock.Advance(time.Millisecond)
		h.wantReply(h.look("bucket"), ok, 0)
		h.clock.Advance(60 * time.Millisecond) // room for one unit
		h.wantReply(h.hits("bucket", 1), ok, 0)
	})
}

// TestGatewayDomain: Envoy Gateway names a domain after its listener,
// "namespace/gateway/listener", which is not a valid namespace; it is served, its counters
// living in the namespace domains.Namespace derives (spec §9.1).
func TestGatewayDomain(t *testing.T) {
	const cfg = `
domain: default/eg/http
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
`
	h := newHarness(t, scalePlan(), map[string]string{"eg.yaml": cfg})
	h.svc.SetConfig(&domains.Config{Descriptors: h.cfg.Descriptors, Routing: domains.Routing{DefaultAccount: "acme"}})
	req := func() *rlsv3.RateLimitResponse {
		return h.call(&rlsv3.RateLimitRequest{Domain: "default/eg/http", Descriptors: []*rlcommon.RateLimitDescriptor{desc("user", "a")}})
	}
	h.want(req().Statuses[0], ok, 2, minute, 1)
	h.want(req().Statuses[0], ok, 2, minute, 0)
	h.want(req().Statuses[0], over, 2, minute, 0)
	// The counter is the /v1 counter of that namespace and the descriptor's key.
	d, err := h.store.Spend(context.Background(), engine.Spend{Counter: engine.Counter{Account: "acme",
		Namespace: domains.Namespace("default/eg/http"), Key: "user=a", Algorithm: engine.FixedWindow, WindowMS: 60_000}, Limit: 2})
	if err != nil || d.Remaining != 0 { // a look at a full counter; a fresh one would have 2
		t.Fatalf("the shared counter: %+v %v", d, err)
	}
}
