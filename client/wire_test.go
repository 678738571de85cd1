package client_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/leashd/leash/client"
	"github.com/leashd/leash/wire"
)

// members returns a struct type's JSON member names and their Go types.
func members(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out[name] = f.Type
		}
	}
	return out
}

// TestClientTypesMatchTheWire: the client's own types, kept where their Go form differs
// from package wire's (a nullable member read as "", pointers for optional members),
// carry exactly the wire type's members, each of the same type or the zero-for-null form
// of it. The other client types are wire's own (aliases), so they cannot drift.
func TestClientTypesMatchTheWire(t *testing.T) {
	for _, c := range []struct {
		mine, theirs any
		absent       []string // wire members the client type leaves out by design
	}{
		{client.Rule{}, wire.Rule{}, nil},
		{client.Rule{}, wire.RuleRequest{}, nil},
		{client.Account{}, wire.Account{}, nil},
		{client.AccountPage{}, wire.AccountPage{}, nil},
		{client.APIKey{}, wire.APIKey{}, []string{"key"}},
		{client.IssuedKey{}, wire.APIKey{}, []string{"source"}},
		{client.AccountUpdate{}, wire.UpdateAccountRequest{}, nil},
		{client.AuditEntry{}, wire.AuditEntry{}, nil},
		{client.AuditPage{}, wire.AuditPage{}, nil},
	} {
		mine, theirs := members(reflect.TypeOf(c.mine)), members(reflect.TypeOf(c.theirs))
		name := reflect.TypeOf(c.mine).String() + " vs " + reflect.TypeOf(c.theirs).String()
		for m, wt := range theirs {
			ct, ok := mine[m]
			switch {
			case slices.Contains(c.absent, m):
				if ok {
					t.Errorf("%s: %s is said to be left out, but the client type has it", name, m)
				}
			case !ok:
				t.Errorf("%s: the client type has no member %s", name, m)
			case ct.Kind() == reflect.Slice || wt.Kind() == reflect.Slice || ct == wt:
				// slices' elements are checked as their own pair
			case wt.Kind() == reflect.Pointer && wt.Elem() == ct:
				// a nullable member, read as its zero value
			case strings.HasPrefix(wt.Name(), "Optional["):
				// an optional member, which the client takes as its value or a pointer
				if v := wt.Field(0).Type; ct != v && (ct.Kind() != reflect.Pointer || ct.Elem() != v) {
					t.Errorf("%s: %s is %s in the client, %s on the wire", name, m, ct, wt)
				}
			default:
				t.Errorf("%s: %s is %s in the client, %s on the wire", name, m, ct, wt)
			}
		}
		for m := range mine {
			if _, ok := theirs[m]; !ok {
				t.Errorf("%s: the client type has %s, which the wire type does not", name, m)
			}
		}
	}
}
