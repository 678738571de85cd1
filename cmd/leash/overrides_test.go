package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
)

// TestOverridesAcrossInstances: two leash processes share one Redis. Instance b has the
// namespace's rule (without overrides) cached; each rule write on a that adds per-key
// overrides is in force on b within 1 s (spec §6.6, §6.7) for /v1 checks, for the Envoy
// endpoint's namespace-rule fallback on the descriptor's counter key, and for leases; and
// so is the write that takes them away again.
func TestOverridesAcrossInstances(t *testing.T) {
	r := redistest.StartServer(t, false)
	env := []string{"LEASH_DEV_API_KEY=k", "LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL=" + r.URL(),
		"LEASH_STORE_REDIS_READ_TIMEOUT=2s"}
	a, b := leashproc.Start(t, binary, nil, env...), leashproc.Start(t, binary, nil, env...)
	rules := func(p *leashproc.Proc, body string) {
		t.Helper()
		if code, out := leashproc.Call(t, "POST", p.URL+"/v1/namespaces/ov/rules", "k", body); code != 200 && code != 201 {
			t.Fatalf("rule write: %d %v", code, out)
		}
	}
	// look is b's limit for key: a check that spends nothing.
	look := func(key string) float64 {
		t.Helper()
		code, out := leashproc.Call(t, "POST", b.URL+"/v1/limit", "k", `{"namespace":"ov","key":"`+key+`","cost":0}`)
		if code != 200 {
			t.Fatalf("check on b: %d %v", code, out)
		}
		return out["limit"].(float64)
	}
	lease := func(key string) float64 {
		t.Helper()
		code, out := leashproc.Call(t, "POST", b.URL+"/v1/leases", "k", `{"namespace":"ov","key":"`+key+`"}`)
		if code != 200 {
			t.Fatalf("lease on b: %d %v", code, out)
		}
		return out["limit"].(float64)
	}
	rls := leashproc.DialRLS(t, b.GRPC)
	envoy := func(value string) uint32 {
		t.Helper()
		resp, err := rls.ShouldRateLimit(context.Background(), leashproc.Request("ov", leashproc.Entry("client", value)))
		if err != nil {
			t.Fatalf("ShouldRateLimit on b: %v", err)
		}
		return resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	// within waits until b reports want for the probe, and fails when that takes 1 s or more
	// from written: the instant before the probe's own rule write, so that no probe's lag
	// includes the time other probes took.
	within := func(what string, written time.Time, probe func() float64, want float64) {
		t.Helper()
		testkit.Eventually(t, fmt.Sprintf("%s: b reports %v", what, want), 3*time.Second-time.Since(written), func() bool { return probe() == want })
		lag := time.Since(written)
		if lag >= time.Second {
			t.Fatalf("%s: in force on b after %v; the bound is 1 s", what, lag)
		}
		t.Logf("%s: in force on b after %v", what, lag.Round(time.Millisecond))
	}

	written := time.Now()
	rules(a, `{"algorithm":"fixed_window","limit":10,"window_ms":60000}`)
	within("the plain rule", written, func() float64 { return look("vip") }, 10)
	rules(a, `{"algorithm":"concurrent_limit","limit":1,"window_ms":30000}`)
	if got := envoy("gold"); got != 10 {
		t.Fatalf("Envoy fallback before the overrides: limit %d, want 10", got)
	}

	// One write per probe, each probe timed from its own write.
	written = time.Now()
	rules(a, `{"algorithm":"fixed_window","limit":10,"window_ms":60000,"overrides":[{"key":"vip","limit":500}]}`)
	within("a check on an overridden key", written, func() float64 { return look("vip") }, 500)
	written = time.Now()
	rules(a, `{"algorithm":"fixed_window","limit":10,"window_ms":60000,"overrides":[{"key":"vip","limit":500},{"key":"client=gold","limit":50}]}`)
	within("the Envoy fallback on an overridden counter key", written, func() float64 { return float64(envoy("gold")) }, 50)
	written = time.Now()
	rules(a, `{"algorithm":"concurrent_limit","limit":1,"window_ms":30000,"overrides":[{"key":"batch","limit":4}]}`)
	within("a lease on an overridden key", written, func() float64 { return lease("batch") }, 4)
	if got := look("other"); got != 10 {
		t.Fatalf("a key without an override: limit %v, want 10", got)
	}

	written = time.Now()
	rules(a, `{"algorithm":"fixed_window","limit":10,"window_ms":60000,"overrides":[{"key":"client=gold","limit":50}]}`)
	within("the overrides' removal", written, func() float64 { return look("vip") }, 10)
	written = time.Now()
	rules(a, `{"algorithm":"fixed_window","limit":10,"window_ms":60000}`)
	within("the overrides' removal on the Envoy endpoint", written, func() float64 { return float64(envoy("gold")) }, 10)
}
