// Package enginekit builds the engine's capabilities over a memory store on a clock the
// test moves, serving the accounts the engine's tests share.
package enginekit

import (
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
)

// Start is the store clock's first instant: 2026-11-22 10:00:00 UTC.
var Start = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// Fixture is a wired engine over a memory store and the accounts it serves.
type Fixture struct {
	// Eng holds the capabilities.
	Eng *wiring.Engine
	// Store is the memory store, as wrapped by New's wrap.
	Store engine.Store
	// Clock is the store's clock, at Start until moved.
	Clock *testkit.FakeClock
	// Accts are the accounts by id: acme and other (pro), cheap (free), capped (tiny).
	Accts map[string]*engine.Account
}

// Plans returns the built-in plans and "tiny": pro with a month quota of 2 and a hard
// cap of 3.
func Plans() map[string]engine.Plan {
	p := engine.BuiltinPlans()
	tiny := p["pro"]
	tiny.Name, tiny.HardCap, tiny.MonthlyQuota = "tiny", testkit.Ptr(int64(3)), 2
	p["tiny"] = tiny
	return p
}

// New returns a fixture whose store is a memory store, wrapped by wrap when not nil;
// the store is closed when the test ends.
func New(t testing.TB, wrap func(engine.Store) engine.Store) *Fixture {
	t.Helper()
	c := testkit.NewFakeClock(Start)
	ms := memstore.New(memstore.Options{Clock: c})
	t.Cleanup(func() { ms.Close() })
	var s engine.Store = ms
	if wrap != nil {
		s = wrap(ms)
	}
	p := Plans()
	dir, err := engine.NewDirectory([]engine.AccountSpec{
		{ID: "acme", Plan: p["pro"], KeyHashes: [][32]byte{engine.HashKey("k-acme")}},
		{ID: "other", Plan: p["pro"], KeyHashes: [][32]byte{engine.HashKey("k-other")}},
		{ID: "cheap", Plan: p["free"], KeyHashes: [][32]byte{engine.HashKey("k-cheap")}},
		{ID: "capped", Plan: p["tiny"], KeyHashes: [][32]byte{engine.HashKey("k-capped")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &Fixture{Eng: wiring.New(engine.RolesOf(s), dir, wiring.Options{}), Store: s, Clock: c, Accts: map[string]*engine.Account{}}
	for _, a := range dir.Accounts() {
		f.Accts[a.ID] = a
	}
	return f
}

// WantCode fails the test unless err has code.
func WantCode(t testing.TB, err error, code engine.Code) {
	t.Helper()
	if got := engine.CodeOf(err); got != code {
		t.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
}
