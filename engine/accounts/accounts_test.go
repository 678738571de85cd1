package accounts_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/accounts"
	"github.com/leashd/leash/engine/audit"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/store/memstore"
)

// TestAccountsOverStore: over their ports an account made through the admin API is
// served at once with the configuration's, its key authenticates until revoked, a
// configured account is read-only, a deleted account leaves no rules or webhook, and every
// change is counted and audited.
func TestAccountsOverStore(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "conf", Plan: engine.BuiltinPlans()["pro"],
		KeyHashes: [][32]byte{engine.HashKey("k-conf")}}})
	if err != nil {
		t.Fatal(err)
	}
	log := audit.New(ms, slog.New(slog.DiscardHandler))
	var actions []accounts.AdminAction
	ac := accounts.New(dir, accounts.Options{Store: ms, Logger: slog.New(slog.DiscardHandler)})
	ad := accounts.NewAdmin(ac, accounts.AdminOptions{Store: ms, Audit: log, Webhooks: ms, Rules: rules.New(ms, log),
		Logger: slog.New(slog.DiscardHandler), OnAdminChange: func(a accounts.AdminAction) { actions = append(actions, a) }})
	if err := ac.LoadAccounts(ctx); err != nil {
		t.Fatal(err)
	}
	op := engine.Actor{Operator: &engine.Operator{ID: "ops"}}

	if _, err := ad.CreateAccount(ctx, op, "conf", "pro"); engine.CodeOf(err) != engine.CodeAccountExists {
		t.Fatalf("create over a configured id: %v", err)
	}
	if _, err := ad.CreateAccount(ctx, op, "new", "nope"); engine.CodeOf(err) != engine.CodeUnknownPlan {
		t.Fatalf("unknown plan: %v", err)
	}
	info, err := ad.CreateAccount(ctx, op, "new", "pro")
	if err != nil || info.Source != engine.SourceAPI || info.CreatedMS == 0 {
		t.Fatalf("create: %+v, %v", info, err)
	}
	key, err := ad.IssueKey(ctx, op, "new", "ci")
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := ac.Authenticate(key.Key); !ok || a.ID != "new" {
		t.Fatalf("issued key does not authenticate at once: %v %v", a, ok)
	}
	if a, ok := ac.Authenticate("k-conf"); !ok || a.ID != "conf" {
		t.Fatalf("configured key: %v %v", a, ok)
	}
	list, next, err := ad.ListAccounts(ctx, 10, "")
	if err != nil || next != "" || len(list) != 2 || list[0].ID != "conf" || list[1].ID != "new" || list[1].Keys != 1 {
		t.Fatalf("list: %+v %q %v", list, next, err)
	}
	if _, err := ad.UpdateAccount(ctx, op, "conf", engine.AccountUpdate{Suspended: new(bool)}); engine.CodeOf(err) != engine.CodeConfigReadOnly {
		t.Fatalf("update of a configured account: %v", err)
	}
	if err := ad.RevokeKey(ctx, op, "new", key.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := ac.Authenticate(key.Key); ok {
		t.Fatal("revoked key still authenticates")
	}
	if _, err := ms.PutRule(ctx, "new", "api", engine.Rule{Algorithm: engine.FixedWindow, Limit: 1, WindowMS: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := ms.PutWebhook(ctx, "new", engine.Webhook{URL: "https://hooks.example/", Secret: "whsec_x"}); err != nil {
		t.Fatal(err)
	}
	if err := ad.DeleteAccount(ctx, op, "new"); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Resolve(ctx, "new"); engine.CodeOf(err) != engine.CodeAccountNotFound {
		t.Fatalf("resolve after delete: %v", err)
	}
	if nss, _ := ms.RuleNamespaces(ctx, "new"); len(nss) != 0 {
		t.Fatalf("deleted account's rules remain: %+v", nss)
	}
	if _, ok, _ := ms.Webhook(ctx, "new"); ok {
		t.Fatal("deleted account's webhook remains")
	}
	want := []accounts.AdminAction{accounts.ActionAccountCreated, accounts.ActionKeyIssued, accounts.ActionKeyRevoked, accounts.ActionAccountDeleted}
	if len(actions) != len(want) {
		t.Fatalf("changes %v, want %v", actions, want)
	}
	for i := range want {
		if actions[i] != want[i] {
			t.Fatalf("changes %v, want %v", actions, want)
		}
	}
	page, err := log.List(ctx, "", "", 10, false, 0)
	if err != nil || len(page.Entries) != 4 || page.Entries[0].Action != engine.AuditAccountDeleted || page.Entries[0].Operator != "ops" {
		t.Fatalf("audit: %+v, %v", page.Entries, err)
	}
}
