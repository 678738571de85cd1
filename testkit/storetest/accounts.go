package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
)

// Accounts and keys of the admin API (spec §15): the AccountStore role, and the engine's
// use of it over the same store (configured accounts are read-only, issued keys
// authenticate until revoked, a suspended account's decisions are refused).

// accounts returns the store's AccountStore port.
func (h *harness) accounts() engine.AccountStore { return h.s.AccountStore }

func (h *harness) create(id, plan string) engine.StoredAccount {
	h.t.Helper()
	a, created, err := h.accounts().CreateAccount(h.ctx, engine.StoredAccount{ID: id, Plan: plan})
	if err != nil || !created {
		h.t.Fatalf("CreateAccount(%q, %q) = %v, %v", id, plan, created, err)
	}
	return a
}

func (h *harness) issue(account, id, name string, hash byte) engine.StoredKey {
	h.t.Helper()
	k, err := h.accounts().IssueKey(h.ctx, engine.StoredKey{ID: id, Account: account, Name: name, Prefix: "lsh_" + id, Hash: [32]byte{hash, 1}})
	if err != nil {
		h.t.Fatalf("IssueKey(%q, %q): %v", account, id, err)
	}
	return k
}

func (h *harness) version() int64 {
	h.t.Helper()
	v, err := h.accounts().AccountsVersion(h.ctx)
	if err != nil {
		h.t.Fatalf("AccountsVersion: %v", err)
	}
	return v
}

func accountString(a engine.StoredAccount) string {
	return fmt.Sprintf("{%s plan=%s suspended=%v created=Base%+d keys=%d}", a.ID, a.Plan, a.Suspended, a.CreatedMS-baseMS, a.Keys)
}

func accountTests() []subtest {
	return []subtest{
		{"CreateAndGet", func(h *harness) {
			s := h.accounts()
			if v := h.version(); v != 0 {
				h.t.Errorf("version of an empty store = %d, want 0", v)
			}
			h.at(1500)
			a := h.create(h.a, "free")
			want := engine.StoredAccount{ID: h.a, Plan: "free", CreatedMS: baseMS + 1500}
			if a != want {
				h.t.Errorf("created %s, want %s", accountString(a), accountString(want))
			}
			v1 := h.version()
			if v1 < 1 {
				h.t.Errorf("version after a create = %d, want above 0", v1)
			}
			h.at(2000)
			again, created, err := s.CreateAccount(h.ctx, engine.StoredAccount{ID: h.a, Plan: "pro"})
			if err != nil || created || again != want {
				h.t.Errorf("second CreateAccount = %s, %v, %v; want %s, false (unchanged)", accountString(again), created, err, accountString(want))
			}
			if v := h.version(); v != v1 {
				h.t.Errorf("a refused create moved the version from %d to %d", v1, v)
			}
			got, ok, err := s.GetAccount(h.ctx, h.a)
			if err != nil || !ok || got != want {
				h.t.Errorf("GetAccount = %s, %v, %v; want %s", accountString(got), ok, err, accountString(want))
			}
			if _, ok, err := s.GetAccount(h.ctx, h.b); err != nil || ok {
				h.t.Errorf("GetAccount of an unknown id = %v, %v; want not found", ok, err)
			}
			if _, _, err := s.CreateAccount(h.ctx, engine.StoredAccount{ID: "Bad id", Plan: "free"}); !errors.Is(err, engine.ErrInvalidArgument) {
				h.t.Errorf("CreateAccount with a bad id: %v, want ErrInvalidArgument", err)
			}
			if _, _, err := s.CreateAccount(h.ctx, engine.StoredAccount{ID: h.b, Plan: ""}); !errors.Is(err, engine.ErrInvalidArgument) {
				h.t.Errorf("CreateAccount with no plan: %v, want ErrInvalidArgument", err)
			}
		}},
		{"ListWithCursor", func(h *harness) {
			s := h.accounts()
			var ids []string
			for i := range 5 {
				id := fmt.Sprintf("%s-%d", h.a, 4-i) // created out of order
				h.create(id, "free")
				ids = append(ids, id)
			}
			slices.Sort(ids)
			var pages [][]string
			after := ""
			for range 5 {
				page, err := s.ListAccounts(h.ctx, after, 2)
				if err != nil {
					h.t.Fatalf("ListAccounts(%q, 2): %v", after, err)
				}
				if len(page) == 0 {
					break
				}
				var p []string
				for _, a := range page {
					p = append(p, a.ID)
				}
				pages = append(pages, p)
				after = p[len(p)-1]
			}
			want := [][]string{ids[0:2], ids[2:4], ids[4:5]}
			if fmt.Sprint(pages) != fmt.Sprint(want) {
				h.t.Errorf("pages of 2 = %v, want %v", pages, want)
			}
			all, err := s.ListAccounts(h.ctx, "", 1000)
			if err != nil || len(all) != 5 {
				h.t.Errorf("ListAccounts(\"\", 1000) = %d accounts, %v; want 5", len(all), err)
			}
			mid, err := s.ListAccounts(h.ctx, ids[1]+"x", 1000) // a cursor between two ids
			if err != nil || len(mid) != 3 || mid[0].ID != ids[2] {
				h.t.Errorf("ListAccounts after a cursor between ids: %v, %v; want from %s", mid, err, ids[2])
			}
		}},
		{"Update", func(h *harness) {
			s := h.accounts()
			h.create(h.a, "free")
			v0 := h.version()
			plan, yesS, noS := "pro", true, false
			a, ok, err := s.UpdateAccount(h.ctx, h.a, engine.AccountUpdate{Plan: &plan})
			if err != nil || !ok || a.Plan != "pro" || a.Suspended {
				h.t.Errorf("re-plan = %s, %v, %v; want plan pro, not suspended", accountString(a), ok, err)
			}
			a, ok, err = s.UpdateAccount(h.ctx, h.a, engine.AccountUpdate{Suspended: &yesS})
			if err != nil || !ok || a.Plan != "pro" || !a.Suspended {
				h.t.Errorf("suspend = %s, %v, %v; want plan pro, suspended", accountString(a), ok, err)
			}
			if got, _, _ := s.GetAccount(h.ctx, h.a); !got.Suspended || got.Plan != "pro" {
				h.t.Errorf("after suspend GetAccount = %s", accountString(got))
			}
			a, _, _ = s.UpdateAccount(h.ctx, h.a, engine.AccountUpdate{Suspended: &noS})
			if a.Suspended {
				h.t.Errorf("resume = %s, want not suspended", accountString(a))
			}
			if v := h.version(); v <= v0 {
				h.t.Errorf("version after updates = %d, want above %d", v, v0)
			}
			if _, ok, err := s.UpdateAccount(h.ctx, h.b, engine.AccountUpdate{Plan: &plan}); err != nil || ok {
				h.t.Errorf("UpdateAccount of an unknown id = %v, %v; want not found", ok, err)
			}
		}},
		{"DeleteTakesKeys", func(h *harness) {
			s := h.accounts()
			h.create(h.a, "free")
			h.issue(h.a, "k1", "one", 1)
			v0 := h.version()
			if deleted, err := s.DeleteAccount(h.ctx, h.a); err != nil || !deleted {
				h.t.Fatalf("DeleteAccount = %v, %v; want deleted", deleted, err)
			}
			if v := h.version(); v <= v0 {
				h.t.Errorf("version after a delete = %d, want above %d", v, v0)
			}
			if deleted, err := s.DeleteAccount(h.ctx, h.a); err != nil || deleted {
				h.t.Errorf("second DeleteAccount = %v, %v; want not deleted", deleted, err)
			}
			if _, ok, _ := s.GetAccount(h.ctx, h.a); ok {
				h.t.Errorf("GetAccount after delete found it")
			}
			if ks, err := s.AccountKeys(h.ctx, h.a); err != nil || len(ks) != 0 {
				h.t.Errorf("keys after delete = %v, %v; want none", ks, err)
			}
			snap, err := s.LoadAccounts(h.ctx)
			if err != nil || len(snap.Accounts) != 0 || len(snap.Keys) != 0 {
				h.t.Errorf("LoadAccounts after delete = %+v, %v; want empty", snap, err)
			}
			// Created again, the account starts with no keys.
			h.create(h.a, "pro")
			if ks, _ := s.AccountKeys(h.ctx, h.a); len(ks) != 0 {
				h.t.Errorf("a re-created account has keys %v", ks)
			}
		}},
		{"KeysIssueListRevoke", func(h *harness) {
			s := h.accounts()
			h.create(h.a, "free")
			h.create(h.b, "free")
			h.at(100)
			k2 := h.issue(h.a, "k2", "second|with bar", 2)
			h.at(200)
			k1 := h.issue(h.a, "k1", "", 1)
			h.issue(h.b, "k1", "b's", 3)
			if k2.CreatedMS != baseMS+100 || k1.CreatedMS != baseMS+200 {
				h.t.Errorf("created = Base%+d, Base%+d; want Base+100, Base+200", k2.CreatedMS-baseMS, k1.CreatedMS-baseMS)
			}
			ks, err := s.AccountKeys(h.ctx, h.a)
			if err != nil || len(ks) != 2 || ks[0] != k2 || ks[1] != k1 {
				h.t.Errorf("AccountKeys = %+v, %v; want k2 then k1 (oldest first), as issued", ks, err)
			}
			if a, _, _ := s.GetAccount(h.ctx, h.a); a.Keys != 2 {
				h.t.Errorf("GetAccount keys = %d, want 2", a.Keys)
			}
			if _, err := s.IssueKey(h.ctx, engine.StoredKey{ID: "k1", Account: h.a, Hash: [32]byte{9}}); !errors.Is(err, engine.ErrInvalidArgument) {
				h.t.Errorf("IssueKey of a key id the account has: %v, want ErrInvalidArgument", err)
			}
			if _, err := s.IssueKey(h.ctx, engine.StoredKey{ID: "k9", Account: h.a + "-none", Hash: [32]byte{9}}); !errors.Is(err, engine.ErrNoAccount) {
				h.t.Errorf("IssueKey for an unknown account: %v, want ErrNoAccount", err)
			}
			if _, err := s.IssueKey(h.ctx, engine.StoredKey{ID: "k9", Account: h.a, Name: strings.Repeat("n", engine.MaxKeyName+1)}); !errors.Is(err, engine.ErrInvalidArgument) {
				h.t.Errorf("IssueKey with a 65-character name: %v, want ErrInvalidArgument", err)
			}
			v0 := h.version()
			if revoked, err := s.RevokeKey(h.ctx, h.a, "k1"); err != nil || !revoked {
				h.t.Errorf("RevokeKey = %v, %v; want revoked", revoked, err)
			}
			if v := h.version(); v <= v0 {
				h.t.Errorf("version after a revoke = %d, want above %d", v, v0)
			}
			if revoked, err := s.RevokeKey(h.ctx, h.a, "k1"); err != nil || revoked {
				h.t.Errorf("second RevokeKey = %v, %v; want not revoked", revoked, err)
			}
			if ks, _ := s.AccountKeys(h.ctx, h.a); len(ks) != 1 || ks[0].ID != "k2" {
				h.t.Errorf("after revoke AccountKeys = %+v, want k2 only", ks)
			}
			if ks, _ := s.AccountKeys(h.ctx, h.b); len(ks) != 1 || ks[0].Name != "b's" {
				h.t.Errorf("the other account's keys = %+v, want its k1", ks)
			}
		}},
		{"AtMostMaxKeys", func(h *harness) {
			h.create(h.a, "free")
			for i := range engine.MaxKeysPerAccount {
				h.issue(h.a, fmt.Sprintf("k%d", i), "", byte(i))
			}
			_, err := h.accounts().IssueKey(h.ctx, engine.StoredKey{ID: "over", Account: h.a, Hash: [32]byte{0xff}})
			if !errors.Is(err, engine.ErrTooManyKeys) {
				h.t.Errorf("key %d: %v, want ErrTooManyKeys", engine.MaxKeysPerAccount+1, err)
			}
			if _, err := h.accounts().RevokeKey(h.ctx, h.a, "k0"); err != nil {
				h.t.Fatal(err)
			}
			h.issue(h.a, "over", "", 0xff) // room again
		}},
		{"Snapshot", func(h *harness) {
			s := h.accounts()
			h.at(10)
			h.create(h.b, "pro")
			h.create(h.a, "free")
			k := h.issue(h.a, "k1", "ci", 7)
			suspend := true
			if _, _, err := s.UpdateAccount(h.ctx, h.b, engine.AccountUpdate{Suspended: &suspend}); err != nil {
				h.t.Fatal(err)
			}
			snap, err := s.LoadAccounts(h.ctx)
			if err != nil {
				h.t.Fatalf("LoadAccounts: %v", err)
			}
			if v := h.version(); snap.Version != v {
				h.t.Errorf("snapshot version %d, AccountsVersion %d", snap.Version, v)
			}
			var got []string
			for _, a := range snap.Accounts {
				got = append(got, accountString(a))
			}
			want := []string{
				accountString(engine.StoredAccount{ID: h.a, Plan: "free", CreatedMS: baseMS + 10, Keys: 1}),
				accountString(engine.StoredAccount{ID: h.b, Plan: "pro", Suspended: true, CreatedMS: baseMS + 10}),
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				h.t.Errorf("snapshot accounts = %v, want %v (by id)", got, want)
			}
			if len(snap.Keys) != 1 || snap.Keys[0] != k {
				h.t.Errorf("snapshot keys = %+v, want %+v (hash included)", snap.Keys, k)
			}
			v := h.version()
			_, _, _ = s.GetAccount(h.ctx, h.a)
			_, _ = s.ListAccounts(h.ctx, "", 10)
			_, _ = s.AccountKeys(h.ctx, h.a)
			_, _ = s.LoadAccounts(h.ctx)
			if v2 := h.version(); v2 != v {
				h.t.Errorf("reads moved the version from %d to %d", v, v2)
			}
		}},
	}
}

// viewTests are the account-wide reads (spec §15.5), each of the port that keeps what it
// reads: a namespace list of rules (RuleStore), an account's usage (UsageStore), the leases
// held on a key (Decider).
func viewTests() []subtest {
	return []subtest{
		{"RuleNamespaces", func(h *harness) {
			rate := engine.Rule{Algorithm: engine.FixedWindow, Limit: 5, WindowMS: 1000}
			conc := engine.Rule{Algorithm: engine.ConcurrentLimit, Limit: 2, WindowMS: 1000}
			h.putRule(h.a, "zeta", rate, true)
			h.putRule(h.a, "alpha", rate, true)
			h.putRule(h.a, "alpha", conc, true)
			h.putRule(h.a, "gone", rate, true)
			h.putRule(h.b, "other", rate, true)
			h.deleteRule(h.a, "gone", engine.RateRule, true)
			got, err := h.s.RuleNamespaces(h.ctx, h.a)
			if want := "[{alpha 2} {zeta 1}]"; err != nil || fmt.Sprint(got) != want {
				h.t.Errorf("RuleNamespaces = %v, %v; want %s", got, err, want)
			}
			h.deleteRule(h.a, "alpha", engine.RateRule, true)
			if got, _ := h.s.RuleNamespaces(h.ctx, h.a); fmt.Sprint(got) != "[{alpha 1} {zeta 1}]" {
				h.t.Errorf("after deleting one of two: %v", got)
			}
			if got, err := h.s.RuleNamespaces(h.ctx, h.a+"-none"); err != nil || len(got) != 0 {
				h.t.Errorf("an account without rules: %v, %v", got, err)
			}
		}},
		{"AccountUsage", func(h *harness) {
			today := engine.DayOf(baseMS)
			h.addUsage(engine.UsageBatch{ID: "u1", Counts: map[engine.UsageKey]engine.UsageCount{
				{Account: h.a, Namespace: "web", Day: today}:     {Total: 5, Blocked: 1},
				{Account: h.a, Namespace: "api", Day: today}:     {Total: 3},
				{Account: h.a, Namespace: "api", Day: today - 2}: {Total: 7, Blocked: 7},
				{Account: h.a, Namespace: "old", Day: today - 9}: {Total: 1},
				{Account: h.b, Namespace: "web", Day: today}:     {Total: 100},
			}})
			rep, err := h.s.ReadAccountUsage(h.ctx, engine.AccountUsageQuery{Account: h.a, FirstDay: today - 5, LastDay: today, Month: today.Month()})
			if err != nil {
				h.t.Fatal(err)
			}
			want := []engine.NamespaceUsage{
				{Namespace: "api", Day: today - 2, UsageCount: engine.UsageCount{Total: 7, Blocked: 7}},
				{Namespace: "api", Day: today, UsageCount: engine.UsageCount{Total: 3}},
				{Namespace: "web", Day: today, UsageCount: engine.UsageCount{Total: 5, Blocked: 1}},
			}
			if fmt.Sprint(rep.Entries) != fmt.Sprint(want) {
				h.t.Errorf("entries = %v, want %v (by day, then namespace; the window only)", rep.Entries, want)
			}
			if rep.MonthTotal != 16 { // all of a's usage is in January 2027
				h.t.Errorf("month total = %d, want 16", rep.MonthTotal)
			}
		}},
		{"HeldLeases", func(h *harness) {
			set := h.set("k")
			h.acquire(set, "t-late", 5, 3000, true, 1, 3000)
			h.at(500)
			h.acquire(set, "t-early", 5, 1000, true, 2, 1000)
			h.acquire(h.set("other"), "t-other", 5, 1000, true, 1, 1000)
			got, err := h.s.HeldLeases(h.ctx, set)
			want := engine.HeldLeases{NowMS: baseMS + 500, Leases: []engine.HeldLease{{Token: "t-early", ExpiresMS: baseMS + 1500}, {Token: "t-late", ExpiresMS: baseMS + 3000}}}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				h.t.Errorf("HeldLeases = %+v, %v; want %+v", got, err, want)
			}
			h.at(1500) // t-early's expiry: no longer held
			got, _ = h.s.HeldLeases(h.ctx, set)
			if len(got.Leases) != 1 || got.Leases[0].Token != "t-late" || got.NowMS != baseMS+1500 {
				h.t.Errorf("at its expiry: %+v, want t-late only", got)
			}
			if got, err := h.s.HeldLeases(h.ctx, h.set("none")); err != nil || len(got.Leases) != 0 {
				h.t.Errorf("an empty set: %+v, %v", got, err)
			}
		}},
	}
}

// engineAccountsTest drives the engine over the store: a configured account is listed
// with source config and cannot be changed, a created account's key authenticates until
// revoked, a suspended account's decisions are refused.
func engineAccountsTest(h *harness) {
	ctx := context.Background()
	plans := engine.BuiltinPlans()
	cfgID := h.a + "-cfg"
	dir, err := engine.NewDirectoryWith([]engine.AccountSpec{{ID: cfgID, Plan: plans["free"], KeyHashes: [][32]byte{engine.HashKey("cfg-key")}}},
		engine.DirectoryOptions{Operators: []engine.OperatorSpec{{ID: "ops", KeyHashes: [][32]byte{engine.HashKey("op-key")}}}})
	if err != nil {
		h.t.Fatal(err)
	}
	eng := wiring.New(engine.RolesOf(h.s.store), dir, wiring.Options{Accounts: h.accounts(), Logger: slog.New(slog.DiscardHandler)})
	if err := eng.Accounts.LoadAccounts(ctx); err != nil {
		h.t.Fatal(err)
	}
	op, ok := eng.Accounts.AuthenticateOperator("op-key")
	if !ok {
		h.t.Fatal("the operator key does not authenticate as an operator")
	}
	if _, ok := eng.Accounts.Authenticate("op-key"); ok {
		h.t.Error("an operator key authenticates as an account")
	}
	if _, ok := eng.Accounts.AuthenticateOperator("cfg-key"); ok {
		h.t.Error("an account key authenticates as an operator")
	}
	by := engine.Actor{Operator: op}
	code := func(err error) engine.Code {
		if err == nil {
			return ""
		}
		return engine.CodeOf(err)
	}
	if _, err := eng.Admin.CreateAccount(ctx, by, cfgID, "pro"); code(err) != engine.CodeAccountExists {
		h.t.Errorf("create with a configured id: %v, want account_exists", err)
	}
	plan := "pro"
	if _, err := eng.Admin.UpdateAccount(ctx, by, cfgID, engine.AccountUpdate{Plan: &plan}); code(err) != engine.CodeConfigReadOnly {
		h.t.Errorf("re-plan a configured account: %v, want config_read_only", err)
	}
	if err := eng.Admin.DeleteAccount(ctx, by, cfgID); code(err) != engine.CodeConfigReadOnly {
		h.t.Errorf("delete a configured account: %v, want config_read_only", err)
	}
	if _, err := eng.Admin.IssueKey(ctx, by, cfgID, ""); code(err) != engine.CodeConfigReadOnly {
		h.t.Errorf("issue a key to a configured account: %v, want config_read_only", err)
	}
	if err := eng.Admin.RevokeKey(ctx, by, cfgID, "config-1"); code(err) != engine.CodeConfigReadOnly {
		h.t.Errorf("revoke a configured key: %v, want config_read_only", err)
	}
	if _, err := eng.Admin.CreateAccount(ctx, by, h.b, "nosuchplan"); code(err) != engine.CodeUnknownPlan {
		h.t.Errorf("create on an unknown plan: %v, want unknown_plan", err)
	}
	if _, err := eng.Admin.CreateAccount(ctx, by, h.b, "free"); err != nil {
		h.t.Fatal(err)
	}
	if _, err := eng.Admin.CreateAccount(ctx, by, h.b, "free"); code(err) != engine.CodeAccountExists {
		h.t.Errorf("create twice: %v, want account_exists", err)
	}
	list, next, err := eng.Admin.ListAccounts(ctx, 10, "")
	if err != nil || next != "" || len(list) != 2 {
		h.t.Fatalf("ListAccounts = %+v, %q, %v", list, next, err)
	}
	for _, a := range list {
		want := engine.SourceAPI
		if a.ID == cfgID {
			want = engine.SourceConfig
		}
		if a.Source != want {
			h.t.Errorf("account %s source %s, want %s", a.ID, a.Source, want)
		}
	}
	if keys, err := eng.Admin.ListKeys(ctx, cfgID); err != nil || len(keys) != 1 || keys[0].Source != engine.SourceConfig {
		h.t.Errorf("configured account's keys = %+v, %v; want one, source config", keys, err)
	}
	k, err := eng.Admin.IssueKey(ctx, by, h.b, "ci")
	if err != nil {
		h.t.Fatal(err)
	}
	if !strings.HasPrefix(k.Key, k.Prefix) || !strings.HasPrefix(k.Key, "lsh_") {
		h.t.Errorf("key %q has prefix %q", k.Key, k.Prefix)
	}
	a, ok := eng.Accounts.Authenticate(k.Key)
	if !ok || a.ID != h.b || a.Source != engine.SourceAPI || a.Plan.Name != "free" {
		h.t.Fatalf("the issued key authenticates as %+v, %v; want %s on plan free", a, ok, h.b)
	}
	suspend := true
	if _, err := eng.Admin.UpdateAccount(ctx, by, h.b, engine.AccountUpdate{Suspended: &suspend, Plan: &plan}); err != nil {
		h.t.Fatal(err)
	}
	a, ok = eng.Accounts.Authenticate(k.Key)
	if !ok || !a.Suspended || a.Plan.Name != "pro" {
		h.t.Fatalf("after suspend and re-plan the key authenticates as %+v, %v", a, ok)
	}
	limit, window := int64(5), int64(1000)
	q := engine.Query{Namespace: "ns", Items: []engine.Item{engine.CheckItem("k", engine.Inline{Algorithm: engine.FixedWindow, Limit: &limit, WindowMS: &window}, nil)}}
	out := make([]engine.ItemResult, 1)
	if _, err := eng.Limits.Decide(ctx, a, &q, out); code(err) != engine.CodeAccountSuspended {
		h.t.Errorf("a suspended account's decision: %v, want account_suspended", err)
	}
	if err := eng.Admin.RevokeKey(ctx, by, h.b, k.ID); err != nil {
		h.t.Fatal(err)
	}
	if _, ok := eng.Accounts.Authenticate(k.Key); ok {
		h.t.Error("a revoked key still authenticates")
	}
	if err := eng.Admin.DeleteAccount(ctx, by, h.b); err != nil {
		h.t.Fatal(err)
	}
	if _, ok := eng.Accounts.Account(h.b); ok {
		h.t.Error("a deleted account is still served")
	}
	if _, err := eng.Admin.GetAccount(ctx, h.b); code(err) != engine.CodeAccountNotFound {
		h.t.Errorf("get a deleted account: %v, want account_not_found", err)
	}
}
