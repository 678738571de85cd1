package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/client"
	"github.com/leashd/leash/testkit/redistest"
)

// TestAdminMethods drives every admin and key method against a real server.
func TestAdminMethods(t *testing.T) {
	p := startLeash(t)
	ops := newClient(t, p.URL, keyOp)
	ctx := context.Background()

	a, err := ops.AdminCreateAccount(ctx, "acme", "free")
	if err != nil || a.ID != "acme" || a.Plan != "free" || a.Source != "api" || a.CreatedAt == "" {
		t.Fatalf("AdminCreateAccount = %+v, %v", a, err)
	}
	if _, err := ops.AdminCreateAccount(ctx, "acme", "free"); !client.IsCode(err, client.CodeAccountExists) {
		t.Errorf("second create: %v, want account_exists", err)
	}
	page, err := ops.AdminListAccounts(ctx, 2, "")
	if err != nil || len(page.Accounts) != 2 || page.Accounts[0].ID != "acme" || page.NextCursor == "" {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	var all []string
	for cursor := ""; ; {
		pg, err := ops.AdminListAccounts(ctx, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, acc := range pg.Accounts {
			all = append(all, acc.ID+"/"+acc.Source)
		}
		if cursor = pg.NextCursor; cursor == "" {
			break
		}
	}
	if got := strings.Join(all, " "); got != "acme/api capped/config free/config scale/config" {
		t.Errorf("all pages = %s", got)
	}
	k, err := ops.AdminIssueKey(ctx, "acme", "ci")
	if err != nil || !strings.HasPrefix(k.Key, "lsh_") || k.Name != "ci" {
		t.Fatalf("AdminIssueKey = %+v, %v", k, err)
	}
	keys, err := ops.AdminListKeys(ctx, "acme")
	if err != nil || len(keys) != 1 || keys[0].ID != k.ID || keys[0].Prefix != k.Prefix {
		t.Fatalf("AdminListKeys = %+v, %v", keys, err)
	}
	acme := newClient(t, p.URL, k.Key)
	own, err := acme.Account(ctx)
	if err != nil || own.ID != "acme" || own.PlanLimits.HardCap == nil || *own.PlanLimits.HardCap != 1_000_000 {
		t.Fatalf("Account = %+v, %v", own, err)
	}
	if _, err := acme.Limit(ctx, "api", "u1", client.WithAlgorithm(client.TokenBucket), client.WithLimit(5), client.WithWindowMS(1000)); !client.IsCode(err, client.CodeAlgorithmNotOnPlan) {
		t.Errorf("token_bucket on free: %v", err)
	}
	pro, yes, no := "pro", true, false
	if a, err := ops.AdminUpdateAccount(ctx, "acme", client.AccountUpdate{Plan: &pro}); err != nil || a.Plan != "pro" || a.Keys != 1 {
		t.Fatalf("re-plan = %+v, %v", a, err)
	}
	if _, err := acme.Limit(ctx, "api", "u1", client.WithAlgorithm(client.TokenBucket), client.WithLimit(5), client.WithWindowMS(1000)); err != nil {
		t.Errorf("token_bucket on pro: %v", err)
	}
	if _, err := ops.AdminUpdateAccount(ctx, "acme", client.AccountUpdate{Suspended: &yes}); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.Limit(ctx, "api", "u1", client.WithLimit(5), client.WithWindowMS(1000)); !client.IsCode(err, client.CodeAccountSuspended) {
		t.Errorf("suspended: %v", err)
	}
	if own, err := acme.Account(ctx); err != nil || !own.Suspended {
		t.Errorf("Account while suspended = %+v, %v", own, err)
	}
	// The account's own audit log stays readable while suspended (spec §15.10).
	if pg, err := acme.Audit(ctx, client.AuditQuery{Limit: 1}); err != nil || len(pg.Entries) != 1 || pg.Entries[0].Action != "account.suspended" ||
		pg.Entries[0].Actor.Type != "operator" || pg.NextCursor == "" {
		t.Errorf("Audit while suspended = %+v, %v", pg, err)
	}
	if _, err := ops.AdminUpdateAccount(ctx, "acme", client.AccountUpdate{Suspended: &no}); err != nil {
		t.Fatal(err)
	}
	k2, err := acme.CreateKey(ctx, "rotated")
	if err != nil {
		t.Fatal(err)
	}
	acme2 := newClient(t, p.URL, k2.Key)
	if err := acme2.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if mine, err := acme2.Keys(ctx); err != nil || len(mine) != 1 || mine[0].ID != k2.ID {
		t.Errorf("Keys = %+v, %v", mine, err)
	}
	if _, err := acme.Account(ctx); !client.IsCode(err, client.CodeUnauthorized) {
		t.Errorf("the revoked key: %v", err)
	}
	if err := ops.AdminRevokeKey(ctx, "acme", k2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.AdminGetAccount(ctx, "scale"); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.AdminUpdateAccount(ctx, "scale", client.AccountUpdate{Plan: &pro}); !client.IsCode(err, client.CodeConfigReadOnly) {
		t.Errorf("re-plan a configured account: %v", err)
	}
	// The account-wide reads.
	k3, err := ops.AdminIssueKey(ctx, "acme", "reads")
	if err != nil {
		t.Fatal(err)
	}
	acme2 = newClient(t, p.URL, k3.Key)
	if _, err := acme2.Limit(ctx, "web", "u1", client.WithLimit(5), client.WithWindowMS(60000)); err != nil {
		t.Fatal(err)
	}
	l, err := acme2.Acquire(ctx, "jobs", "w1", client.WithLimit(2), client.WithWindowMS(60000))
	if err != nil {
		t.Fatal(err)
	}
	held, err := acme2.Leases(ctx, "jobs", "w1")
	if err != nil || held.Active != 1 || len(held.Leases) != 1 || held.Leases[0].LeaseID != l.ID || held.Limit != nil {
		t.Errorf("Leases = %+v, %v", held, err)
	}
	if _, _, err := acme2.SetRule(ctx, "jobs", client.Rule{Algorithm: client.ConcurrentLimit, Limit: 4, WindowMS: 1000}); err != nil {
		t.Fatal(err)
	}
	if held, err := acme2.Leases(ctx, "jobs", "w1"); err != nil || held.Limit == nil || *held.Limit != 4 {
		t.Errorf("Leases with a rule = %+v, %v", held, err)
	}
	if nss, err := acme2.Namespaces(ctx); err != nil || len(nss) < 1 || nss[0].Namespace != "jobs" || nss[0].Rules != 1 {
		t.Errorf("Namespaces = %+v, %v", nss, err)
	}
	if u, err := acme2.Usage(ctx); err != nil || len(u.Days) != 30 || u.Month.Quota != 10_000_000 {
		t.Errorf("Usage = %+v, %v", u, err)
	}
	if u, err := ops.AdminUsage(ctx, "acme"); err != nil || len(u.Days) != 30 {
		t.Errorf("AdminUsage = %+v, %v", u, err)
	}
	// The audit log, a page of 3 at a time, newest first: the operator's view of acme's, and
	// acme's own.
	var ids, actions []string
	for cursor := ""; ; {
		pg, err := ops.AdminAudit(ctx, client.AuditQuery{Account: "acme", Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range pg.Entries {
			ids, actions = append(ids, e.ID), append(actions, e.Action)
		}
		if cursor = pg.NextCursor; cursor == "" {
			break
		}
	}
	want := "rule.set key.issued key.revoked key.revoked key.issued account.resumed account.suspended account.plan_changed key.issued account.created"
	if got := strings.Join(actions, " "); got != want {
		t.Errorf("AdminAudit pages = %s, want %s", got, want)
	}
	mine, err := acme2.Audit(ctx, client.AuditQuery{Account: "ignored", Limit: 100})
	if err != nil || len(mine.Entries) != len(ids) || mine.NextCursor != "" {
		t.Fatalf("Audit = %+v, %v", mine, err)
	}
	for i, e := range mine.Entries {
		if e.ID != ids[i] {
			t.Errorf("Audit entry %d = %s, the operator's %s", i, e.ID, ids[i])
		}
	}
	if set := mine.Entries[0]; set.Actor.Type != "account" || set.Actor.ID != "acme" || set.Actor.KeyID != k3.ID ||
		set.Target != "jobs/concurrent" || set.Details["limit"] != "4" || set.RequestID == "" || set.Client == "" {
		t.Errorf("rule.set entry = %+v", set)
	}
	if _, err := ops.AdminAudit(ctx, client.AuditQuery{Account: "Not An Id"}); !client.IsCode(err, client.CodeInvalidRequest) {
		t.Errorf("AdminAudit of a bad account id: %v", err)
	}
	if _, err := acme2.AdminAudit(ctx, client.AuditQuery{}); !client.IsCode(err, client.CodeOperatorKeyRequired) {
		t.Errorf("AdminAudit with an account's key: %v", err)
	}
	if _, err := ops.Audit(ctx, client.AuditQuery{}); !client.IsCode(err, client.CodeAccountKeyRequired) {
		t.Errorf("Audit with an operator's key: %v", err)
	}
	if err := ops.AdminDeleteAccount(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.AdminGetAccount(ctx, "acme"); !client.IsCode(err, client.CodeAccountNotFound) {
		t.Errorf("deleted: %v", err)
	}
	if _, err := newClient(t, p.URL, keyScale).AdminListAccounts(ctx, 0, ""); !client.IsCode(err, client.CodeOperatorKeyRequired) {
		t.Errorf("an account key on an admin route: %v", err)
	}
	if _, err := ops.Account(ctx); !client.IsCode(err, client.CodeAccountKeyRequired) {
		t.Errorf("an operator key on an account route: %v", err)
	}
	p.NoCrash(t)
}

// within polls cond every 20 ms for up to d.
func within(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < d {
		if cond() {
			return time.Since(start), true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start), cond()
}

// TestAccountsAcrossInstances: two instances on one Redis. An account and key created on
// A serve on B within 1 s; a key revoked on B is refused on A within 1 s; a plan change on
// A gates on B within 1 s (spec §15.2).
func TestAccountsAcrossInstances(t *testing.T) {
	r := redistest.StartServer(t, false)
	env := []string{"LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL=" + r.URL()}
	pa, pb := startLeash(t, env...), startLeash(t, env...)
	opsA, opsB := newClient(t, pa.URL, keyOp), newClient(t, pb.URL, keyOp)
	ctx := context.Background()
	tb := []client.Option{client.WithAlgorithm(client.TokenBucket), client.WithLimit(1000), client.WithWindowMS(1000)}

	if _, err := opsA.AdminCreateAccount(ctx, "acme", "pro"); err != nil {
		t.Fatal(err)
	}
	k, err := opsA.AdminIssueKey(ctx, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	onA, onB := newClient(t, pa.URL, k.Key), newClient(t, pb.URL, k.Key)
	if _, err := onA.Limit(ctx, "api", "u", tb...); err != nil {
		t.Fatalf("the key on A at once: %v", err)
	}
	if d, ok := within(time.Second, func() bool { _, err := onB.Limit(ctx, "api", "u", tb...); return err == nil }); !ok {
		t.Fatalf("the key created on A does not serve on B after %v", d)
	} else {
		t.Logf("created on A, served on B after %v", d)
	}

	free := "free"
	if _, err := opsA.AdminUpdateAccount(ctx, "acme", client.AccountUpdate{Plan: &free}); err != nil {
		t.Fatal(err)
	}
	if d, ok := within(time.Second, func() bool {
		_, err := onB.Limit(ctx, "api", "u", tb...)
		return client.IsCode(err, client.CodeAlgorithmNotOnPlan)
	}); !ok {
		t.Fatalf("the re-plan on A does not gate on B after %v", d)
	} else {
		t.Logf("re-planned on A, gating on B after %v", d)
	}

	if err := opsB.AdminRevokeKey(ctx, "acme", k.ID); err != nil {
		t.Fatal(err)
	}
	if d, ok := within(time.Second, func() bool {
		_, err := onA.Limit(ctx, "api", "u")
		return client.IsCode(err, client.CodeUnauthorized)
	}); !ok {
		t.Fatalf("the key revoked on B still serves on A after %v", d)
	} else {
		t.Logf("revoked on B, refused on A after %v", d)
	}
	pa.NoCrash(t)
	pb.NoCrash(t)
}
