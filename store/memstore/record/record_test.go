package record_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/memstore/record"
)

func TestStringsAndVarints(t *testing.T) {
	b := record.AppendString(nil, "acct")
	b = record.AppendString(b, "")
	b = record.AppendVarints(b, -3, 1<<40)
	s1, rest, err := record.ReadString(b)
	if err != nil || s1 != "acct" {
		t.Fatalf("ReadString = %q, %v", s1, err)
	}
	s2, rest, err := record.ReadString(rest)
	if err != nil || s2 != "" {
		t.Fatalf("ReadString = %q, %v", s2, err)
	}
	var x, y int64
	if rest, err = record.ReadVarints(rest, &x, &y); err != nil || x != -3 || y != 1<<40 || len(rest) != 0 {
		t.Fatalf("ReadVarints = %d, %d, %q, %v", x, y, rest, err)
	}
	if _, _, err := record.ReadString([]byte{5, 'a'}); !errors.Is(err, record.ErrMalformed) {
		t.Errorf("ReadString of a short string = %v, want ErrMalformed", err)
	}
	if _, err := record.ReadVarints(nil, &x); !errors.Is(err, record.ErrMalformed) {
		t.Errorf("ReadVarints of nothing = %v, want ErrMalformed", err)
	}
}

func TestRuleRoundTrip(t *testing.T) {
	name := "gold"
	r := &engine.Rule{Algorithm: engine.Algorithm(1), Limit: 10, WindowMS: 60_000, Name: &name,
		Overrides: engine.NewOverrides([]engine.Override{{Key: "k", Limit: 5}})}
	got, err := record.DecodeRule(record.EncodeRule(r))
	if err != nil {
		t.Fatal(err)
	}
	if got.Algorithm != r.Algorithm || got.Limit != r.Limit || got.WindowMS != r.WindowMS || *got.Name != name ||
		!reflect.DeepEqual(got.Overrides.List(), r.Overrides.List()) {
		t.Errorf("DecodeRule(EncodeRule(r)) = %+v, want %+v", got, r)
	}
	if _, err := record.DecodeRule([]byte("{")); !errors.Is(err, record.ErrMalformed) {
		t.Errorf("DecodeRule of bad JSON = %v, want ErrMalformed", err)
	}
}

// TestKeysDistinct: keys of different kinds, or different parts, never collide.
func TestKeysDistinct(t *testing.T) {
	keys := [][]byte{
		record.CounterKey(nil, "ab"), record.LeaseKey(nil, "a", "b"), record.LeaseKey(nil, "ab", ""),
		record.RuleKey(nil, "ab", 0), record.DailyKey(nil, engine.UsageKey{Account: "a", Namespace: "b", Day: 1}),
		record.MonthlyKey(nil, "ab", 1), record.Prefixed(nil, record.Batch, "ab"), record.APIKey(nil, "a", "b"),
		record.APIKey(nil, "ab", ""),
	}
	seen := map[string]int{}
	for i, k := range keys {
		if j, ok := seen[string(k)]; ok {
			t.Errorf("keys %d and %d are both %q", j, i, k)
		}
		seen[string(k)] = i
	}
}
