package leases_test

import (
	"context"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/leases"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
)

// leaseEngine is an engine on a memory store for fuzzing, replaced by a fresh one every
// few thousand inputs so that the usage it records for fuzzed namespaces stays small.
type leaseEngine struct {
	eng         *wiring.Engine
	store       *memstore.Store
	acme, other *engine.Account
	uses        int
}

// next returns le, or a fresh engine in its place when le is nil or used up.
func (le *leaseEngine) next(t *testing.T) *leaseEngine {
	if le != nil && le.uses < 5000 {
		le.uses++
		return le
	}
	le.close()
	ms := memstore.New(memstore.Options{Clock: testkit.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))})
	pro := engine.BuiltinPlans()["pro"]
	dir, err := engine.NewDirectory([]engine.AccountSpec{
		{ID: "acme", Plan: pro, KeyHashes: [][32]byte{engine.HashKey("k-acme")}},
		{ID: "other", Plan: pro, KeyHashes: [][32]byte{engine.HashKey("k-other")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := dir.Account("acme")
	other, _ := dir.Account("other")
	return &leaseEngine{eng: wiring.New(engine.RolesOf(ms), dir, wiring.Options{}), store: ms, acme: acme, other: other}
}

func (le *leaseEngine) close() {
	if le != nil {
		le.store.Close()
	}
}

// FuzzLeaseIssued checks lease ids where they are issued: the id Acquire returns parses
// to the namespace and key the lease was taken on, and releasing with it frees exactly
// that lease. The same token under another key, or the id under another account,
// releases nothing. A namespace or key no lease can be taken on is invalid_request.
func FuzzLeaseIssued(f *testing.F) {
	for _, s := range [][3]string{
		{"jobs", "worker-1", "worker-2"},
		{"a", "ü✓ \u2028", "ü✓"},
		{"ns", "k", "k"},
		{"ns", "a.b", "a"},
		{"-ns", "k", "k"},
		{"ns", "", "k"},
		{"ns", "a\x1fb", "ab"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	var le *leaseEngine
	ctx := context.Background()
	f.Cleanup(func() { le.close() })
	f.Fuzz(func(t *testing.T, ns, key, key2 string) {
		le = le.next(t)
		fx, acme, other := le, le.acme, le.other
		d, err := fx.eng.Leases.Acquire(ctx, acme, &leases.AcquireRequest{Namespace: ns, Key: key, Limit: testkit.Ptr(int64(1)), WindowMS: testkit.Ptr(int64(60_000))})
		leasable := engine.ValidNamespace(ns) && engine.ValidKey(key)
		if err != nil || !leasable {
			if leasable || engine.CodeOf(err) != engine.CodeInvalidRequest {
				t.Fatalf("Acquire(%q, %q) = %+v, %v", ns, key, d, err)
			}
			return
		}
		if !d.Allowed {
			t.Fatalf("Acquire(%q, %q) denied with no lease held: %+v", ns, key, d)
		}
		gotNS, gotKey, tok, ok := engine.ParseLeaseID(d.LeaseID)
		if !ok || gotNS != ns || gotKey != key {
			t.Fatalf("lease on %q, %q has id %q, which parses as %q, %q (%v)", ns, key, d.LeaseID, gotNS, gotKey, ok)
		}
		if r, err := fx.eng.Leases.Release(ctx, other, d.LeaseID); err != nil || r.Released || r.Active != 0 {
			t.Fatalf("another account's Release(%q) = %+v, %v", d.LeaseID, r, err)
		}
		if key2 != key && engine.ValidKey(key2) {
			moved := engine.FormatLeaseID(ns, key2, tok)
			if r, err := fx.eng.Leases.Release(ctx, acme, moved); err != nil || r.Released {
				t.Fatalf("the token under key %q: Release(%q) = %+v, %v", key2, moved, r, err)
			}
		}
		if r, err := fx.eng.Leases.Renew(ctx, acme, d.LeaseID, nil); err != nil || !r.Renewed || r.Active != 1 {
			t.Fatalf("Renew(%q) = %+v, %v", d.LeaseID, r, err)
		}
		if r, err := fx.eng.Leases.Release(ctx, acme, d.LeaseID); err != nil || !r.Released || r.Active != 0 {
			t.Fatalf("Release(%q) = %+v, %v", d.LeaseID, r, err)
		}
		if r, err := fx.eng.Leases.Release(ctx, acme, d.LeaseID); err != nil || r.Released {
			t.Fatalf("second Release(%q) = %+v, %v", d.LeaseID, r, err)
		}
	})
}
