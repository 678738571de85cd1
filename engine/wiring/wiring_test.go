package wiring_test

import (
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/store/memstore"
)

// TestNewNeedsEveryRole: an engine missing a store role is refused at construction, not
// at its first request.
func TestNewNeedsEveryRole(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	roles := engine.RolesOf(ms)
	roles.Usage = nil
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted roles without a UsageStore")
		}
	}()
	wiring.New(roles, nil, wiring.Options{})
}
