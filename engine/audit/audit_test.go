package audit_test

import (
	"context"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/audit"
	"github.com/leashd/leash/store/memstore"
)

// TestLogRecordsAndPages: a change is recorded with who made it and the request's origin,
// pages run newest first with a cursor, an account recreated with a deleted one's id does
// not read the deleted one's entries, and a log without a store refuses reads as internal.
func TestLogRecordsAndPages(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	log := audit.New(ms, nil)
	ctx := engine.WithOrigin(context.Background(), engine.Origin{Client: "192.0.2.1", RequestID: "req-1", KeyID: "key_1"})
	for i, created := range []int64{100, 100, 200} {
		log.Record(ctx, engine.Actor{Account: "acme"}, engine.AuditEntry{Action: engine.AuditRuleSet, Account: "acme",
			AccountCreatedMS: created, Target: "api/rate", Details: map[string]string{"n": string(rune('a' + i))}})
	}
	first, err := log.List(context.Background(), "acme", "", 2, false, 0)
	if err != nil || len(first.Entries) != 2 || first.Next == "" {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	got := first.Entries[0]
	if got.Details["n"] != "c" || got.ActorAccount != "acme" || got.KeyID != "key_1" || got.Client != "192.0.2.1" || got.RequestID != "req-1" {
		t.Fatalf("newest entry: %+v", got)
	}
	rest, err := log.List(context.Background(), "acme", first.Next, 2, false, 0)
	if err != nil || len(rest.Entries) != 1 || rest.Next != "" || rest.Entries[0].Details["n"] != "a" {
		t.Fatalf("second page: %+v, %v", rest, err)
	}
	own, err := log.List(context.Background(), "acme", "", 10, true, 200)
	if err != nil || len(own.Entries) != 1 {
		t.Fatalf("own entries of the account created at 200: %+v, %v", own, err)
	}
	if _, err := log.List(context.Background(), "acme", "", 0, false, 0); engine.CodeOf(err) != engine.CodeInvalidRequest {
		t.Fatalf("limit 0: %v", err)
	}
	none := audit.New(nil, nil)
	none.Record(ctx, engine.Actor{Account: "acme"}, engine.AuditEntry{Action: engine.AuditRuleSet, Account: "acme"})
	if _, err := none.List(context.Background(), "", "", 10, false, 0); engine.CodeOf(err) != engine.CodeInternal {
		t.Fatalf("no store: %v, want internal", err)
	}
}
