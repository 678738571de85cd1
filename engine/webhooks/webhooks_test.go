package webhooks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/audit"
	"github.com/leashd/leash/engine/webhooks"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
)

// portOnly hides every method of the store but the Port's.
type portOnly struct{ webhooks.Port }

// TestWebhooksOverPort: over its port alone a webhook is screened and set with a secret,
// a refused URL is webhook_url_rejected, a test event and the usage events reach the
// outbox (each usage event once a month), and removing the webhook is audited.
func TestWebhooksOverPort(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ms := memstore.New(memstore.Options{Clock: testkit.NewFakeClock(now)})
	t.Cleanup(func() { ms.Close() })
	p := engine.BuiltinPlans()
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: p["pro"]}, {ID: "cheap", Plan: p["free"]}})
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := dir.Account("acme")
	cheap, _ := dir.Account("cheap")
	enqueued := 0
	// The screen accepts https URLs and gives them back lower-cased, as a canonical form.
	screen := func(_ context.Context, raw string) (string, error) {
		if !strings.HasPrefix(raw, "https://") {
			return "", &webhooks.URLRejectedError{Reason: "scheme must be https"}
		}
		return strings.ToLower(raw), nil
	}
	log := audit.New(ms, nil)
	w := webhooks.New(portOnly{ms}, log, nil, webhooks.Options{Screen: screen, Enqueued: func() { enqueued++ }})

	if _, err := w.Test(ctx, acme); engine.CodeOf(err) != engine.CodeWebhookNotFound {
		t.Fatalf("test without a webhook: %v", err)
	}
	if _, err := w.Put(ctx, acme, "http://hooks.example/x"); engine.CodeOf(err) != engine.CodeWebhookURLRejected {
		t.Fatalf("http URL: %v, want webhook_url_rejected", err)
	}
	if _, err := w.Put(ctx, cheap, "https://hooks.example/x"); engine.CodeOf(err) != engine.CodeWebhookNotOnPlan {
		t.Fatalf("free plan: %v", err)
	}
	hook, err := w.Put(ctx, acme, "https://Hooks.Example/X")
	if err != nil || hook.URL != "https://hooks.example/x" || !strings.HasPrefix(hook.Secret, "whsec_") {
		t.Fatalf("put: %+v, %v", hook, err)
	}
	if got, err := w.Get(ctx, acme); err != nil || got != hook.URL {
		t.Fatalf("get: %q, %v", got, err)
	}
	id, err := w.Test(ctx, acme)
	if err != nil {
		t.Fatal(err)
	}
	month := engine.MonthOf(now)
	accounts := []*engine.Account{acme}
	for range 2 { // the second time, nothing new: once per account and month
		if err := w.NotifyUsage(ctx, now.UnixMilli(), month, accounts, []int64{p["pro"].MonthlyQuota + 1}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := ms.Claim(ctx, 10, 60_000)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, ev := range evs {
		types[ev.Type]++
	}
	if len(evs) != 2 || types[webhooks.EventTest] != 1 || types[webhooks.EventQuotaExceeded] != 1 || evs[0].ID != id && evs[1].ID != id {
		t.Fatalf("outbox: %+v", evs)
	}
	if enqueued != 2 {
		t.Fatalf("Enqueued called %d times, want 2", enqueued)
	}
	if err := w.Delete(ctx, acme); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Get(ctx, acme); engine.CodeOf(err) != engine.CodeWebhookNotFound {
		t.Fatalf("after delete: %v", err)
	}
	page, err := log.List(ctx, "acme", "", 10, false, 0)
	if err != nil || len(page.Entries) != 2 || page.Entries[0].Action != engine.AuditWebhookDeleted ||
		page.Entries[1].Details["host"] != "hooks.example" {
		t.Fatalf("audit: %+v, %v", page.Entries, err)
	}
	noScreen := webhooks.New(portOnly{ms}, log, nil, webhooks.Options{})
	if _, err := noScreen.Put(ctx, acme, "https://hooks.example/x"); engine.CodeOf(err) != engine.CodeInternal {
		t.Fatalf("no screen: %v, want internal", err)
	}
}
