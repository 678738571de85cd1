package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/client"
	"github.com/leashd/leash/webhook/signature"
)

// TestEndpoints calls every /v1 endpoint through the client against a real server.
func TestEndpoints(t *testing.T) {
	p := startLeash(t)
	c := newClient(t, p.URL, keyScale)
	ctx := context.Background()

	// POST /v1/limit: allowed, then denied (a result, not an error).
	for i, want := range []bool{true, true, false} {
		res, err := c.Limit(ctx, "api", "user-42", client.WithAlgorithm(client.FixedWindow), client.WithLimit(2), client.WithWindow(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed != want || res.Limit != 2 {
			t.Fatalf("check %d = %+v, want allowed %v", i, res, want)
		}
		if !want && (res.ResetMS <= 0 || res.RetryAfter() < time.Second || res.Remaining != 0) {
			t.Fatalf("denied check = %+v, RetryAfter %v", res, res.RetryAfter())
		}
	}
	// cost 0 looks without spending.
	if res, err := c.Limit(ctx, "api", "peek", client.WithLimit(1), client.WithWindow(time.Minute), client.WithCost(0)); err != nil || !res.Allowed || res.Remaining != 1 {
		t.Fatalf("peek = %+v, %v", res, err)
	}

	// POST /v1/limit/reset: true, then false (404 key_not_found read as "nothing to reset").
	for _, want := range []bool{true, false} {
		ok, err := c.Reset(ctx, "api", "user-42", client.WithAlgorithm(client.FixedWindow), client.WithWindow(time.Minute))
		if err != nil || ok != want {
			t.Fatalf("reset = %v, %v; want %v", ok, err, want)
		}
	}

	// Rules: set (created, then replaced), list, delete.
	r, created, err := c.SetRule(ctx, "api", client.Rule{Algorithm: client.TokenBucket, Limit: 5, WindowMS: 1000, Name: "default"})
	if err != nil || !created || r.Namespace != "api" || r.Name != "default" || r.Limit != 5 {
		t.Fatalf("SetRule = %+v %v %v", r, created, err)
	}
	if _, created, err = c.SetRule(ctx, "api", client.Rule{Algorithm: client.TokenBucket, Limit: 6, WindowMS: 1000}); err != nil || created {
		t.Fatalf("replacing SetRule: created %v, %v", created, err)
	}
	if _, _, err = c.SetRule(ctx, "api", client.Rule{Algorithm: client.ConcurrentLimit, Limit: 1, WindowMS: 30000}); err != nil {
		t.Fatal(err)
	}
	rules, err := c.Rules(ctx, "api")
	if err != nil || len(rules) != 2 || rules[0].Algorithm != client.TokenBucket || rules[0].Limit != 6 || rules[0].Name != "" ||
		rules[1].Algorithm != client.ConcurrentLimit {
		t.Fatalf("Rules = %+v, %v", rules, err)
	}
	if res, err := c.Limit(ctx, "api", "by-rule"); err != nil || res.Limit != 6 {
		t.Fatalf("check by the rule = %+v, %v", res, err)
	}
	for _, want := range []bool{true, false} {
		if ok, err := c.DeleteRule(ctx, "api", client.RuleKindRate); err != nil || ok != want {
			t.Fatalf("DeleteRule = %v, %v; want %v", ok, err, want)
		}
	}

	// Leases: acquire (limit from the concurrent rule), denied, renew, release.
	l, err := c.Acquire(ctx, "api", "export")
	if err != nil || l.Limit != 1 || l.TTL != 30*time.Second || !strings.HasPrefix(l.ID, "l1.") {
		t.Fatalf("Acquire = %+v, %v", l, err)
	}
	_, err = c.Acquire(ctx, "api", "export")
	var de *client.DeniedError
	if !errors.As(err, &de) || !client.IsDenied(err) || de.Active != 1 || de.Limit != 1 || de.Reset <= 0 {
		t.Fatalf("second Acquire = %v", err)
	}
	if rr, err := l.Renew(ctx, 45*time.Second); err != nil || !rr.Renewed || rr.ResetMS != 45000 {
		t.Fatalf("Renew = %+v, %v", rr, err)
	}
	if rel, err := l.Release(ctx); err != nil || !rel.Released || rel.Active != 0 {
		t.Fatalf("Release = %+v, %v", rel, err)
	}
	if rel, err := l.Release(ctx); rel != nil || err != nil {
		t.Fatalf("second Lease.Release = %+v, %v; want a no-op", rel, err)
	}
	if rel, err := c.Release(ctx, l.ID); err != nil || rel.Released {
		t.Fatalf("Release of a released id = %+v, %v", rel, err)
	}
	if rr, err := c.Renew(ctx, l.ID, 0); err != nil || rr.Renewed || rr.ResetMS != 0 {
		t.Fatalf("Renew of a released lease = %+v, %v", rr, err)
	}

	// Stats: 30 days, the month's totals (counted within 2 s, spec §7.3).
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := c.Stats(ctx, "api")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Days) != 30 || st.Namespace != "api" || st.Month.HardCap != nil || st.Month.Quota != 1_000_000_000 {
			t.Fatalf("Stats = %+v", st)
		}
		// 5 checks and 2 acquisitions; 1 denied check, 1 denied lease.
		if st.Total == 7 && st.Blocked == 2 && st.Month.Total == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stats never counted 7 (2 blocked): %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Webhook: none, set (secret once), get, test (a signed delivery arrives), delete.
	if _, ok, err := c.Webhook(ctx); ok || err != nil {
		t.Fatalf("Webhook with none set = %v, %v", ok, err)
	}
	if _, err := c.TestWebhook(ctx); !client.IsCode(err, client.CodeWebhookNotFound) {
		t.Fatalf("TestWebhook with none set = %v", err)
	}
	got := make(chan *http.Request, 4)
	bodies := make(chan []byte, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer recv.Close()
	wh, err := c.SetWebhook(ctx, recv.URL+"/hook")
	if err != nil || !strings.HasPrefix(wh.Secret, "whsec_") || wh.URL != recv.URL+"/hook" {
		t.Fatalf("SetWebhook = %+v, %v", wh, err)
	}
	if w, ok, err := c.Webhook(ctx); !ok || err != nil || w.URL != wh.URL || w.Secret != "" {
		t.Fatalf("Webhook = %+v %v %v", w, ok, err)
	}
	id, err := c.TestWebhook(ctx)
	if err != nil || !strings.HasPrefix(id, "evt_") {
		t.Fatalf("TestWebhook = %q, %v", id, err)
	}
	select {
	case r := <-got:
		body := <-bodies
		if err := signature.Verify(wh.Secret, r.Header.Get(signature.Header), body, time.Minute); err != nil {
			t.Fatalf("delivery does not verify: %v", err)
		}
		var ev struct{ ID, Type string }
		if json.Unmarshal(body, &ev) != nil || ev.ID != id || ev.Type != "webhook.test" {
			t.Fatalf("delivery body %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook delivery within 10 s")
	}
	for range 2 {
		if err := c.DeleteWebhook(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := c.Webhook(ctx); ok || err != nil {
		t.Fatalf("Webhook after delete = %v, %v", ok, err)
	}
}

// TestErrorCodes: every code the service can be made to answer reaches the caller as a
// *Error with status, code, message and Retry-After.
func TestErrorCodes(t *testing.T) {
	p := startLeash(t)
	ctx := context.Background()
	scale, free, capped := newClient(t, p.URL, keyScale), newClient(t, p.URL, keyFree), newClient(t, p.URL, keyCapped)
	nobody := newClient(t, p.URL, "wrong-key")
	minute := client.WithWindow(time.Minute)
	tests := []struct {
		name   string
		call   func() error
		status int
		code   string
	}{
		{"invalid_request", func() error { _, err := scale.Limit(ctx, "bad ns!", "k", client.WithLimit(1), minute); return err }, 400, client.CodeInvalidRequest},
		{"missing_limit", func() error { _, err := scale.Limit(ctx, "n", "k"); return err }, 400, client.CodeMissingLimit},
		{"unknown_algorithm", func() error {
			_, err := scale.Limit(ctx, "n", "k", client.WithAlgorithm("leaky"), client.WithLimit(1), minute)
			return err
		}, 400, client.CodeUnknownAlgorithm},
		{"invalid_rule", func() error {
			_, _, err := scale.SetRule(ctx, "n", client.Rule{Algorithm: client.FixedWindow, Limit: 2_000_000_000, WindowMS: 1000})
			return err
		}, 400, client.CodeInvalidRule},
		{"invalid_lease_id", func() error { _, err := scale.Renew(ctx, "not-a-lease", 0); return err }, 400, client.CodeInvalidLeaseID},
		{"unauthorized", func() error { _, err := nobody.Stats(ctx, "n"); return err }, 401, client.CodeUnauthorized},
		{"algorithm_not_on_plan", func() error {
			_, err := free.Limit(ctx, "n", "k", client.WithAlgorithm(client.TokenBucket), client.WithLimit(1), minute)
			return err
		}, 403, client.CodeAlgorithmNotOnPlan},
		{"concurrent_not_on_plan", func() error { _, err := free.Acquire(ctx, "n", "k", client.WithLimit(1), minute); return err }, 403, client.CodeConcurrentNotOnPlan},
		{"webhook_not_on_plan", func() error { _, err := free.SetWebhook(ctx, "https://example.com/h"); return err }, 403, client.CodeWebhookNotOnPlan},
		{"webhook_not_found", func() error { _, err := scale.TestWebhook(ctx); return err }, 404, client.CodeWebhookNotFound},
		{"not_found", func() error { _, err := scale.DeleteRule(ctx, "n", "bogus"); return err }, 404, client.CodeNotFound},
		{"request_too_large", func() error {
			_, _, err := scale.SetRule(ctx, "n", client.Rule{Algorithm: client.FixedWindow, Limit: 1, WindowMS: 1, Name: strings.Repeat("x", 70_000)})
			return err
		}, 413, client.CodeRequestTooLarge},
		{"webhook_url_rejected", func() error { _, err := scale.SetWebhook(ctx, "ftp://example.com/"); return err }, 422, client.CodeWebhookURLRejected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want a *client.Error", err)
			}
			if e.StatusCode != tc.status || e.Code != tc.code || e.Message == "" || e.RequestID == "" || !client.IsCode(err, tc.code) {
				t.Fatalf("err = %+v, want %d %s", e, tc.status, tc.code)
			}
			if client.IsUnavailable(err) {
				t.Fatalf("%s counted as unavailable", tc.code)
			}
		})
	}

	t.Run("hard_cap_exceeded", func(t *testing.T) {
		var err error
		for i := 0; i < 4 && err == nil; i++ {
			_, err = capped.Limit(ctx, "n", "k", client.WithLimit(100), minute)
		}
		var e *client.Error
		if !errors.As(err, &e) || e.StatusCode != 429 || e.Code != client.CodeHardCapExceeded || e.RetryAfter < time.Second {
			t.Fatalf("4th decision past a hard cap of 3 = %v (%+v)", err, e)
		}
	})

	t.Run("unavailable", func(t *testing.T) {
		// A memory store with room for two entries: a third live lease finds none (spec §11.1).
		p := startLeash(t, "LEASH_STORE_MEMORY_MAX_ENTRIES=2")
		c := newClient(t, p.URL, keyScale)
		for _, k := range []string{"a", "b"} {
			if _, err := c.Acquire(ctx, "n", k, client.WithLimit(5), minute); err != nil {
				t.Fatal(err)
			}
		}
		_, err := c.Acquire(ctx, "n", "c", client.WithLimit(5), minute)
		var e *client.Error
		if !errors.As(err, &e) || e.StatusCode != 503 || e.Code != client.CodeUnavailable || e.RetryAfter != time.Second || !client.IsUnavailable(err) {
			t.Fatalf("acquire with a full store = %v (%+v)", err, e)
		}
	})
}

// TestRetries: a release is retried after a 503 (honouring Retry-After) and after a
// broken connection; a check and an acquisition are never retried.
func TestRetries(t *testing.T) {
	var calls atomic.Int32
	var mode atomic.Value // "503", "503-long", "drop"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n == 1 {
			switch mode.Load() {
			case "drop":
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
				return
			case "503-long":
				w.Header().Set("Retry-After", "30")
			default:
				w.Header().Set("Retry-After", "1")
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			io.WriteString(w, `{"error":"service temporarily unavailable","code":"unavailable"}`)
			return
		}
		switch {
		case r.Method == http.MethodDelete:
			io.WriteString(w, `{"released":true,"active":0}`)
		case r.URL.Path == "/v1/limit":
			io.WriteString(w, `{"allowed":true,"limit":1,"remaining":0,"reset_ms":10}`)
		default:
			io.WriteString(w, `{"allowed":true,"lease_id":"l1.x.y.z","active":1,"limit":1,"reset_ms":10}`)
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, "k")
	ctx := context.Background()

	reset := func(m string) { calls.Store(0); mode.Store(m) }

	reset("503")
	start := time.Now()
	rel, err := c.Release(ctx, "l1.x.y.z")
	if err != nil || !rel.Released || calls.Load() != 2 {
		t.Fatalf("release after a 503 = %+v, %v, %d calls", rel, err, calls.Load())
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("retried after %v, before Retry-After: 1", d)
	}

	reset("drop")
	if rel, err := c.Release(ctx, "l1.x.y.z"); err != nil || !rel.Released || calls.Load() != 2 {
		t.Fatalf("release after a dropped connection = %+v, %v, %d calls", rel, err, calls.Load())
	}

	reset("503-long") // Retry-After beyond MaxRetryWait (5 s): the error, at once
	if _, err := c.Release(ctx, "l1.x.y.z"); !client.IsCode(err, client.CodeUnavailable) || calls.Load() != 1 {
		t.Fatalf("release with Retry-After 30 = %v, %d calls", err, calls.Load())
	}

	for _, m := range []string{"503", "drop"} {
		reset(m)
		if _, err := c.Limit(ctx, "n", "k", client.WithLimit(1), client.WithWindowMS(10)); err == nil || calls.Load() != 1 || !client.IsUnavailable(err) {
			t.Fatalf("check after %s = %v, %d calls; want the error and no retry", m, err, calls.Load())
		}
		reset(m)
		if _, err := c.Acquire(ctx, "n", "k", client.WithLimit(1), client.WithWindowMS(10)); err == nil || calls.Load() != 1 {
			t.Fatalf("acquire after %s = %v, %d calls; want the error and no retry", m, err, calls.Load())
		}
	}

	// No retries at all when MaxRetries is negative.
	nc, _ := client.New(client.Options{BaseURL: srv.URL, MaxRetries: -1})
	reset("503")
	if _, err := nc.Release(ctx, "l1.x.y.z"); err == nil || calls.Load() != 1 {
		t.Fatalf("MaxRetries -1: %v, %d calls", err, calls.Load())
	}
}

// TestOverridesDecode: a rule's overrides round-trip through JSON in the API's shape.
func TestOverridesDecode(t *testing.T) {
	in := `{"namespace":"api","algorithm":"fixed_window","limit":10,"window_ms":1000,"name":null,
		"overrides":[{"key":"big","limit":1000},{"key":"slow","limit":1,"window_ms":60000}]}`
	var r client.Rule
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Overrides) != 2 || r.Overrides[0].Key != "big" || r.Overrides[0].WindowMS != nil ||
		*r.Overrides[1].WindowMS != 60000 || r.Overrides[1].Limit != 1 {
		t.Fatalf("decoded %+v", r)
	}
	out, _ := json.Marshal(client.Rule{Algorithm: "fixed_window", Limit: 1, WindowMS: 1})
	if strings.Contains(string(out), "overrides") || strings.Contains(string(out), "namespace") {
		t.Fatalf("a rule without overrides encodes %s", out)
	}
	out, _ = json.Marshal(r.Overrides)
	if string(out) != `[{"key":"big","limit":1000},{"key":"slow","limit":1,"window_ms":60000}]` {
		t.Fatalf("overrides encode %s", out)
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"localhost:8080", "ftp://x", "http://"} {
		if _, err := client.New(client.Options{BaseURL: u}); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	c, err := client.New(client.Options{})
	if err != nil || c.BaseURL() != client.DefaultBaseURL {
		t.Fatalf("default = %v, %v", c, err)
	}
}

// TestErrorMapping: answers the client cannot provoke from a real server (it always sends
// JSON to routes that exist) map the same way; a body that is not Leash's keeps the status.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		status      int
		body        string
		code        string
		unavailable bool
	}{
		{405, `{"error":"method not allowed","code":"method_not_allowed"}`, client.CodeMethodNotAllowed, false},
		{415, `{"error":"Content-Type must be application/json","code":"unsupported_media_type"}`, client.CodeUnsupportedMediaType, false},
		{431, `{"error":"request headers too large","code":"request_header_too_large"}`, client.CodeRequestHeaderTooLarge, false},
		{500, `{"error":"internal error","code":"internal"}`, client.CodeInternal, true},
		{502, `<html>bad gateway</html>`, "", true},
		{404, `not json`, "", false},
	}
	for _, tc := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", "rid-1")
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		}))
		c, _ := client.New(client.Options{BaseURL: srv.URL, MaxRetries: -1})
		_, err := c.Stats(context.Background(), "n")
		srv.Close()
		var e *client.Error
		if !errors.As(err, &e) || e.StatusCode != tc.status || e.Code != tc.code || e.Message == "" || e.RequestID != "rid-1" ||
			client.IsUnavailable(err) != tc.unavailable {
			t.Errorf("%d %s: %v (%+v)", tc.status, tc.body, err, e)
		}
	}
}

// TestOverrides: a rule's per-key overrides written and read through the client, and
// used by checks and leases on the overridden keys (spec §6.7).
func TestOverrides(t *testing.T) {
	p := startLeash(t)
	c := newClient(t, p.URL, keyScale)
	ctx := context.Background()
	w := int64(60000)
	rule := client.Rule{Algorithm: client.FixedWindow, Limit: 1, WindowMS: 60000,
		Overrides: []client.Override{{Key: "big", Limit: 3}, {Key: "slow", Limit: 2, WindowMS: &w}}}
	got, _, err := c.SetRule(ctx, "api", rule)
	if err != nil || len(got.Overrides) != 2 || got.Overrides[0] != rule.Overrides[0] || *got.Overrides[1].WindowMS != w {
		t.Fatalf("SetRule = %+v, %v", got, err)
	}
	rules, err := c.Rules(ctx, "api")
	if err != nil || len(rules) != 1 || len(rules[0].Overrides) != 2 || rules[0].Overrides[1].Key != "slow" {
		t.Fatalf("Rules = %+v, %v", rules, err)
	}
	for key, limit := range map[string]int64{"big": 3, "slow": 2, "other": 1} {
		res, err := c.Limit(ctx, "api", key)
		if err != nil || res.Limit != limit {
			t.Fatalf("check on %q = %+v, %v; want limit %d", key, res, err, limit)
		}
	}
	if res, err := c.Limit(ctx, "api", "big", client.WithLimit(10)); err != nil || res.Limit != 10 {
		t.Fatalf("inline limit on an overridden key = %+v, %v", res, err)
	}
	_, _, err = c.SetRule(ctx, "api", client.Rule{Algorithm: client.FixedWindow, Limit: 1, WindowMS: 1000,
		Overrides: []client.Override{{Key: "k", Limit: 0}}})
	if !client.IsCode(err, client.CodeInvalidRule) {
		t.Fatalf("override limit 0 = %v", err)
	}

	// Leases: the concurrent rule's override.
	if _, _, err := c.SetRule(ctx, "jobs", client.Rule{Algorithm: client.ConcurrentLimit, Limit: 1, WindowMS: 30000,
		Overrides: []client.Override{{Key: "wide", Limit: 2}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if l, err := c.Acquire(ctx, "jobs", "wide"); err != nil || l.Limit != 2 {
			t.Fatalf("lease %d on the overridden key = %+v, %v", i, l, err)
		}
	}
	if _, err := c.Acquire(ctx, "jobs", "wide"); !client.IsDenied(err) {
		t.Fatalf("third lease on a key overridden to 2 = %v", err)
	}
}
