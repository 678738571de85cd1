package accounts_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/accounts"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
)

// twoEngines are two instances over one store, as two processes sharing one Redis.
func twoEngines(t *testing.T, cfg []engine.AccountSpec) (a, b *wiring.Engine, s *memstore.Store) {
	t.Helper()
	s = memstore.New(memstore.Options{})
	t.Cleanup(func() { s.Close() })
	dir, err := engine.NewDirectoryWith(cfg, engine.DirectoryOptions{
		Operators: []engine.OperatorSpec{{ID: "ops", KeyHashes: [][32]byte{engine.HashKey("op-key")}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	t.Cleanup(func() { cancel(); <-done; <-done })
	var engs [2]*wiring.Engine
	for i := range engs {
		engs[i] = wiring.New(engine.RolesOf(s), dir, wiring.Options{Accounts: s})
		if err := engs[i].Accounts.LoadAccounts(ctx); err != nil {
			t.Fatal(err)
		}
		go func() { engs[i].Accounts.WatchAccounts(ctx); done <- struct{}{} }()
	}
	return engs[0], engs[1], s
}

// onePoll lets a bubble's fake time run one AccountsPollInterval and waits until every
// instance has finished the poll that came due.
func onePoll() {
	time.Sleep(accounts.AccountsPollInterval)
	synctest.Wait()
}

// TestAccountsPropagateWithinOnePoll runs in a synctest bubble: a change made on one
// instance is in force on the other after exactly one poll (spec §15.2), on any machine.
func TestAccountsPropagateWithinOnePoll(t *testing.T) {
	synctest.Test(t, testAccountsPropagateWithinOnePoll)
}

func testAccountsPropagateWithinOnePoll(t *testing.T) {
	a, b, _ := twoEngines(t, nil)
	ctx := context.Background()
	op, _ := a.Accounts.AuthenticateOperator("op-key")
	by := engine.Actor{Operator: op}
	if _, err := a.Admin.CreateAccount(ctx, by, "acme", "free"); err != nil {
		t.Fatal(err)
	}
	k, err := a.Admin.IssueKey(ctx, by, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Accounts.Authenticate(k.Key); !ok {
		t.Fatal("the key does not authenticate at once on the instance that issued it")
	}
	onePoll()
	if _, ok := b.Accounts.Authenticate(k.Key); !ok {
		t.Fatal("the key does not authenticate on the other instance after one poll")
	}
	plan := "pro"
	if _, err := b.Admin.UpdateAccount(ctx, by, "acme", engine.AccountUpdate{Plan: &plan}); err != nil {
		t.Fatal(err)
	}
	onePoll()
	if acc, ok := a.Accounts.Authenticate(k.Key); !ok || acc.Plan.Name != "pro" {
		t.Fatal("the re-plan is not in force on the other instance after one poll")
	}
	if err := b.Admin.RevokeKey(ctx, by, "acme", k.ID); err != nil {
		t.Fatal(err)
	}
	onePoll()
	if _, ok := a.Accounts.Authenticate(k.Key); ok {
		t.Fatal("the revoked key still authenticates on the other instance after one poll")
	}
}

func TestAccountsConflictWithConfig(t *testing.T) {
	a, _, s := twoEngines(t, nil)
	ctx := context.Background()
	op, _ := a.Accounts.AuthenticateOperator("op-key")
	if _, err := a.Admin.CreateAccount(ctx, engine.Actor{Operator: op}, "acme", "free"); err != nil {
		t.Fatal(err)
	}
	clash, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: engine.BuiltinPlans()["pro"]}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Accounts.CheckDirectory(clash); err == nil || !strings.Contains(err.Error(), `"acme"`) {
		t.Errorf("CheckDirectory with a clashing config = %v, want an error naming acme", err)
	}
	fresh := wiring.New(engine.RolesOf(s), clash, wiring.Options{Accounts: s})
	if err := fresh.Accounts.LoadAccounts(ctx); err == nil || !strings.Contains(err.Error(), `"acme"`) {
		t.Errorf("LoadAccounts at start-up with a clashing config = %v, want an error naming acme", err)
	}
	noPlan, _ := engine.NewDirectoryWith(nil, engine.DirectoryOptions{Plans: map[string]engine.Plan{"pro": engine.BuiltinPlans()["pro"]}})
	if err := a.Accounts.CheckDirectory(noPlan); err == nil || !strings.Contains(err.Error(), `"free"`) {
		t.Errorf("CheckDirectory without the account's plan = %v, want an error naming plan free", err)
	}
}

func TestAccountsBadInput(t *testing.T) {
	a, _, _ := twoEngines(t, nil)
	ctx := context.Background()
	op, _ := a.Accounts.AuthenticateOperator("op-key")
	by := engine.Actor{Operator: op}
	for _, c := range []struct {
		name string
		err  error
		code engine.Code
	}{
		{"bad id", func() error { _, err := a.Admin.CreateAccount(ctx, by, "Acme!", "free"); return err }(), engine.CodeInvalidRequest},
		{"bad plan", func() error { _, err := a.Admin.CreateAccount(ctx, by, "acme", "Free"); return err }(), engine.CodeInvalidRequest},
		{"unknown plan", func() error { _, err := a.Admin.CreateAccount(ctx, by, "acme", "gold"); return err }(), engine.CodeUnknownPlan},
		{"limit 0", func() error { _, _, err := a.Admin.ListAccounts(ctx, 0, ""); return err }(), engine.CodeInvalidRequest},
		{"limit 1001", func() error { _, _, err := a.Admin.ListAccounts(ctx, 1001, ""); return err }(), engine.CodeInvalidRequest},
		{"bad cursor", func() error { _, _, err := a.Admin.ListAccounts(ctx, 10, "A B"); return err }(), engine.CodeInvalidRequest},
		{"unknown account", func() error { _, err := a.Admin.GetAccount(ctx, "nobody"); return err }(), engine.CodeAccountNotFound},
		{"long name", func() error { _, err := a.Admin.IssueKey(ctx, by, "nobody", strings.Repeat("é", 65)); return err }(), engine.CodeInvalidRequest},
		{"key to nobody", func() error { _, err := a.Admin.IssueKey(ctx, by, "nobody", ""); return err }(), engine.CodeAccountNotFound},
	} {
		if got := engine.CodeOf(c.err); got != c.code {
			t.Errorf("%s: %v, want %s", c.name, c.err, c.code)
		}
	}
	if _, err := a.Admin.IssueKey(ctx, by, "nobody", strings.Repeat("é", 64)); engine.CodeOf(err) != engine.CodeAccountNotFound {
		t.Errorf("a 64-character name is refused: %v", err)
	}
}

func TestAccountsListMergesConfig(t *testing.T) {
	a, _, _ := twoEngines(t, []engine.AccountSpec{{ID: "m-config", Plan: engine.BuiltinPlans()["pro"]}})
	ctx := context.Background()
	op, _ := a.Accounts.AuthenticateOperator("op-key")
	for _, id := range []string{"z-api", "a-api", "n-api"} {
		if _, err := a.Admin.CreateAccount(ctx, engine.Actor{Operator: op}, id, "free"); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	cursor := ""
	for range 10 {
		page, next, err := a.Admin.ListAccounts(ctx, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			got = append(got, p.ID+"/"+string(p.Source))
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if want := "[a-api/api m-config/config n-api/api z-api/api]"; strings.Join([]string{"[", strings.Join(got, " "), "]"}, "") != want {
		t.Errorf("pages = %v, want %s", got, want)
	}
}
