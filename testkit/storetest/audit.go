package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/leashd/leash/engine"
)

// The audit log (spec §15.10): the AuditStore role. Entries get their id and instant from
// the store's clock, list newest first by account or all together, page by id, expire
// after engine.AuditRetention and are bounded per account.

// audit returns the store's AuditStore port.
func (h *harness) audit() engine.AuditStore { return h.s.AuditStore }

func (h *harness) appendAudit(e engine.AuditEntry) engine.AuditEntry {
	h.t.Helper()
	got, err := h.audit().AppendAudit(h.ctx, e)
	if err != nil {
		h.t.Fatalf("AppendAudit(%+v): %v", e, err)
	}
	return got
}

func (h *harness) listAudit(account, before string, limit int) []engine.AuditEntry {
	h.t.Helper()
	l, err := h.audit().ListAudit(h.ctx, account, before, limit)
	if err != nil {
		h.t.Fatalf("ListAudit(%q, %q, %d): %v", account, before, limit, err)
	}
	return l
}

// targets returns the entries' targets, in order.
func targets(l []engine.AuditEntry) []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.Target
	}
	return out
}

// ofAccounts keeps the entries of the given accounts: a store shared by several
// subtests lists theirs too in the whole log.
func ofAccounts(l []engine.AuditEntry, accounts ...string) []engine.AuditEntry {
	return slices.DeleteFunc(slices.Clone(l), func(e engine.AuditEntry) bool { return !slices.Contains(accounts, e.Account) })
}

func auditTests() []subtest {
	return []subtest{
		{"AppendAndList", func(h *harness) {
			first := h.appendAudit(engine.AuditEntry{Operator: "ops", Action: engine.AuditAccountCreated, Account: h.a, AccountCreatedMS: baseMS - 7, Target: h.a,
				Details: map[string]string{"plan": "pro"}, Client: "198.51.100.7", RequestID: "req-1"})
			if first.TimeMS != baseMS || !engine.ValidAuditCursor(first.ID) || !strings.HasPrefix(first.ID, fmt.Sprintf("%013d-", baseMS)) {
				t := first
				h.t.Fatalf("appended entry id %q at %d; want an id of Base's instant, time Base (%d)", t.ID, t.TimeMS, baseMS)
			}
			h.at(5)
			second := h.appendAudit(engine.AuditEntry{ActorAccount: h.a, KeyID: "key_0123456789abcdef", Action: engine.AuditKeyIssued,
				Account: h.a, Target: "key_1", Details: map[string]string{"name": "ci"}, Client: "2001:db8::1", RequestID: "req-2"})
			h.at(9)
			h.appendAudit(engine.AuditEntry{Operator: "ops", Action: engine.AuditAccountSuspended, Account: h.b, Target: h.b})
			got := h.listAudit(h.a, "", 10)
			if len(got) != 2 || !reflect.DeepEqual(got[0], second) || !reflect.DeepEqual(got[1], first) {
				h.t.Fatalf("ListAudit(a) = %+v; want [%+v %+v]", got, second, first)
			}
			if got := targets(h.listAudit(h.b, "", 10)); !slices.Equal(got, []string{h.b}) {
				h.t.Errorf("ListAudit(b) targets %v", got)
			}
			if got := targets(ofAccounts(h.listAudit("", "", 1000), h.a, h.b)); !slices.Equal(got, []string{h.b, "key_1", h.a}) {
				h.t.Errorf("ListAudit(all) targets %v, want newest first", got)
			}
			if got := h.listAudit("nobody-"+h.a, "", 10); len(got) != 0 {
				h.t.Errorf("an account without entries lists %v", got)
			}
		}},
		{"Pages", func(h *harness) {
			for i := range 7 {
				h.at(int64(i))
				h.appendAudit(engine.AuditEntry{Operator: "ops", Action: engine.AuditKeyRevoked, Account: h.a, Target: fmt.Sprintf("k%d", i)})
			}
			var seen []string
			before := ""
			for range 4 {
				page := h.listAudit(h.a, before, 3)
				seen = append(seen, targets(page)...)
				if len(page) < 3 {
					break
				}
				before = page[len(page)-1].ID
			}
			if want := []string{"k6", "k5", "k4", "k3", "k2", "k1", "k0"}; !slices.Equal(seen, want) {
				h.t.Fatalf("pages of 3 gave %v, want %v", seen, want)
			}
		}},
		{"Order", func(h *harness) {
			// Entries in one millisecond, and after the clock went back, still list in the
			// order they were recorded.
			var want []string
			for i := range 20 {
				if i == 15 {
					h.at(-3)
				}
				e := h.appendAudit(engine.AuditEntry{Operator: "ops", Action: engine.AuditKeyIssued, Account: h.a, Target: fmt.Sprint(i)})
				if e.TimeMS != baseMS {
					h.t.Errorf("entry %d at Base%+d, want Base: the instant never goes back", i, e.TimeMS-baseMS)
				}
				want = append([]string{fmt.Sprint(i)}, want...)
			}
			if got := targets(h.listAudit(h.a, "", 100)); !slices.Equal(got, want) {
				h.t.Fatalf("20 entries in one millisecond list as %v, want %v", got, want)
			}
		}},
		{"Retention", func(h *harness) {
			h.appendAudit(engine.AuditEntry{Operator: "ops", Action: engine.AuditAccountCreated, Account: h.a, Target: "old"})
			h.at(engine.AuditRetention.Milliseconds() - 1)
			h.appendAudit(engine.AuditEntry{Operator: "ops", Action: engine.AuditAccountResumed, Account: h.a, Target: "new"})
			if got := targets(h.listAudit(h.a, "", 10)); !slices.Equal(got, []string{"new", "old"}) {
				h.t.Fatalf("within the retention: %v", got)
			}
			h.at(engine.AuditRetention.Milliseconds())
			if got := targets(h.listAudit(h.a, "", 10)); !slices.Equal(got, []string{"new"}) {
				h.t.Fatalf("%v after the retention: %v, want only the newer entry", engine.AuditRetention, got)
			}
			if got := targets(ofAccounts(h.listAudit("", "", 1000), h.a)); !slices.Equal(got, []string{"new"}) {
				h.t.Fatalf("the whole log after the retention: %v", got)
			}
			h.at(2*engine.AuditRetention.Milliseconds() + int64(time.Hour/time.Millisecond))
			if got := h.listAudit(h.a, "", 10); len(got) != 0 {
				h.t.Fatalf("every entry expired, yet %v", targets(got))
			}
		}},
		{"BoundedPerAccount", func(h *harness) {
			for i := range engine.MaxAuditPerAccount + 5 {
				h.appendAudit(engine.AuditEntry{Operator: "ops", Action: engine.AuditRuleSet, Account: h.a, Target: fmt.Sprint(i)})
			}
			var n int
			before := ""
			for {
				page := h.listAudit(h.a, before, engine.MaxAuditPage)
				n += len(page)
				if len(page) < engine.MaxAuditPage {
					break
				}
				before = page[len(page)-1].ID
			}
			if n != engine.MaxAuditPerAccount {
				h.t.Fatalf("%d entries kept of one account, want %d", n, engine.MaxAuditPerAccount)
			}
		}},
		{"BadEntry", func(h *harness) {
			for _, e := range []engine.AuditEntry{{Account: h.a}, {Action: engine.AuditKeyIssued}, {Action: engine.AuditKeyIssued, Account: "Not An Id"}} {
				if _, err := h.audit().AppendAudit(h.ctx, e); !errors.Is(err, engine.ErrInvalidArgument) {
					h.t.Errorf("AppendAudit(%+v) = %v, want ErrInvalidArgument", e, err)
				}
			}
		}},
	}
}
