package rules_test

import (
	"context"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/audit"
	"github.com/leashd/leash/engine/rules"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
)

// portOnly hides every method of the store but the Port's.
type portOnly struct{ rules.Port }

// TestRulesOverPort: over its port alone rules are written (created, then replaced),
// listed, refused when out of range, deleted one by one and all at once, and each change
// is audited.
func TestRulesOverPort(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: engine.BuiltinPlans()["pro"]}})
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := dir.Account("acme")
	log := audit.New(ms, nil)
	r := rules.New(portOnly{ms}, log)

	put := func(ns, alg string, limit int64) (bool, error) {
		_, created, err := r.Put(ctx, acme, ns, &rules.RuleRequest{Algorithm: &alg, Limit: &limit, WindowMS: testkit.Ptr(int64(1000)),
			Overrides: []rules.OverrideRequest{{Key: testkit.Ptr("vip"), Limit: testkit.Ptr(limit * 10)}}})
		return created, err
	}
	if created, err := put("api", "fixed_window", 5); err != nil || !created {
		t.Fatalf("first put: created=%v, %v", created, err)
	}
	if created, err := put("api", "token_bucket", 7); err != nil || created {
		t.Fatalf("replacing put: created=%v, %v", created, err)
	}
	if _, err := put("api", "concurrent_limit", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := put("web", "sliding_window", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := put("api", "fixed_window", 0); engine.CodeOf(err) != engine.CodeInvalidRule {
		t.Fatalf("limit 0: %v, want invalid_rule", err)
	}
	list, err := r.List(ctx, acme, "api")
	if err != nil || len(list) != 2 || list[0].Algorithm != engine.TokenBucket || list[1].Algorithm != engine.ConcurrentLimit {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if l, _ := list[0].For("vip"); l != 70 {
		t.Fatalf("override of vip: %d, want 70", l)
	}
	if deleted, err := r.Delete(ctx, acme, "api", engine.ConcurrentRule); err != nil || !deleted {
		t.Fatalf("delete: %v, %v", deleted, err)
	}
	if err := r.DeleteAll(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if nss, err := ms.RuleNamespaces(ctx, "acme"); err != nil || len(nss) != 0 {
		t.Fatalf("after DeleteAll: %+v, %v", nss, err)
	}
	page, err := log.List(ctx, "acme", "", 100, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	var sets, deletes int
	for _, e := range page.Entries {
		switch e.Action {
		case engine.AuditRuleSet:
			sets++
		case engine.AuditRuleDeleted:
			deletes++
		}
	}
	if sets != 4 || deletes != 1 {
		t.Fatalf("audit: %d rule.set and %d rule.deleted, want 4 and 1 (DeleteAll is the account's removal, not audited)", sets, deletes)
	}
}
