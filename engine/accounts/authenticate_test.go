package accounts_test

import (
	"testing"

	"github.com/leashd/leash/testkit/enginekit"
)

func TestAuthenticate(t *testing.T) {
	f := enginekit.New(t, nil)
	if a, ok := f.Eng.Accounts.Authenticate("k-acme"); !ok || a.ID != "acme" {
		t.Fatalf("Authenticate(k-acme) = %v, %v", a, ok)
	}
	if _, ok := f.Eng.Accounts.Authenticate("nope"); ok {
		t.Fatal("unknown key authenticated")
	}
}
