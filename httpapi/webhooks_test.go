package httpapi_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

// TestWebhookLifecycle walks the webhook configuration of spec §8.1: set, read without
// the secret, replace with a new secret, test, delete (idempotent), per account.
func TestWebhookLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	mustError(t, e.get(pWebhook, keyAcme), 404, "webhook_not_found")

	put := func(key, url string) (gotURL, secret string) {
		t.Helper()
		r := e.do(req{method: http.MethodPut, path: pWebhook, key: key, body: `{"url":"` + url + `"}`})
		if r.code != 200 {
			t.Fatalf("PUT %s: %d %s", url, r.code, r.body)
		}
		m := r.obj(t)
		if len(m) != 2 {
			t.Fatalf("PUT body %s: want exactly url and secret", r.body)
		}
		gotURL, _ = m["url"].(string)
		secret, _ = m["secret"].(string)
		raw, ok := strings.CutPrefix(secret, "whsec_")
		if b, err := base64.RawURLEncoding.DecodeString(raw); !ok || err != nil || len(b) != 32 {
			t.Fatalf("secret %q: want whsec_ and 32 bytes in base64url", secret)
		}
		return gotURL, secret
	}

	// The URL is stored as screened: host in canonical form.
	u1, s1 := put(keyAcme, "https://HOOKS.example.com./leash?x=1")
	if u1 != "https://hooks.example.com/leash?x=1" {
		t.Fatalf("url %q, want the canonical form", u1)
	}
	mustBody(t, e.get(pWebhook, keyAcme), 200, `{"url":"https://hooks.example.com/leash?x=1"}`)
	// Another account sees none of it.
	mustError(t, e.get(pWebhook, keyBeta), 404, "webhook_not_found")
	mustError(t, e.post(pWebhookTest, keyBeta, ""), 404, "webhook_not_found")

	// Every PUT replaces the secret.
	u2, s2 := put(keyAcme, "https://hooks.example.com/v2")
	if u2 != "https://hooks.example.com/v2" || s2 == s1 {
		t.Fatalf("second PUT: url %q, secret reused: %v", u2, s2 == s1)
	}
	w, ok, err := e.store.Webhook(context.Background(), "acme")
	if err != nil || !ok || w.URL != u2 || w.Secret != s2 {
		t.Fatalf("stored webhook %+v %v %v, want %s with the new secret", w, ok, err, u2)
	}

	// POST /test takes no body and queues one webhook.test event for the account.
	r := e.post(pWebhookTest, keyAcme, "")
	if r.code != http.StatusAccepted {
		t.Fatalf("test: %d %s", r.code, r.body)
	}
	id, _ := r.obj(t)["event_id"].(string)
	if !strings.HasPrefix(id, "evt_") || len(r.obj(t)) != 1 {
		t.Fatalf("test body %s: want {event_id: evt_...}", r.body)
	}
	evs, err := e.store.Claim(context.Background(), 10, 1000)
	if err != nil || len(evs) != 1 {
		t.Fatalf("outbox after test: %v %v, want one event", evs, err)
	}
	if ev := evs[0]; ev.ID != id || ev.Account != "acme" || ev.Type != "webhook.test" || string(ev.Data) != "{}" ||
		ev.CreatedMS != t0.UnixMilli() {
		t.Fatalf("queued event %+v", ev)
	}

	// DELETE is 204 with no body, and idempotent.
	for range 2 {
		r := e.del(pWebhook, keyAcme)
		if r.code != http.StatusNoContent || r.body != "" || r.hdr.Get("X-Request-Id") == "" {
			t.Fatalf("DELETE: %d %q %v", r.code, r.body, r.hdr)
		}
	}
	mustError(t, e.get(pWebhook, keyAcme), 404, "webhook_not_found")
	mustError(t, e.post(pWebhookTest, keyAcme, ""), 404, "webhook_not_found")

	// A plan without webhooks can still read (none) and delete.
	mustError(t, e.get(pWebhook, keyFree), 404, "webhook_not_found")
	if r := e.del(pWebhook, keyFree); r.code != http.StatusNoContent {
		t.Fatalf("DELETE on free: %d %s", r.code, r.body)
	}
}
