package engine

import (
	"strings"
	"testing"
)

func TestLeaseIDRoundTrip(t *testing.T) {
	for _, tc := range []struct{ ns, key string }{
		{"a", "b"},
		{"api.v1_x-y", "user:42/ünïcode ✓"},
		{strings.Repeat("n", 128), strings.Repeat("k", 512)},
	} {
		tok := NewLeaseToken()
		id := FormatLeaseID(tc.ns, tc.key, tok)
		ns, key, gotTok, ok := ParseLeaseID(id)
		if !ok || ns != tc.ns || key != tc.key || gotTok != tok {
			t.Fatalf("ParseLeaseID(%q) = %q %q %q %v", id, ns, key, gotTok, ok)
		}
	}
}

func TestLeaseIDRejects(t *testing.T) {
	good := FormatLeaseID("ns", "key", NewLeaseToken())
	parts := strings.Split(good, ".")
	for _, id := range []string{
		"",
		"l1.",
		"l2." + strings.Join(parts[1:], "."),
		strings.Join(parts[:3], "."),
		good + ".x",
		good + "A",
		parts[0] + ".." + parts[2] + "." + parts[3],                                                        // empty namespace
		parts[0] + "." + leaseIDEncoding.EncodeToString([]byte("-bad")) + "." + parts[2] + "." + parts[3],  // invalid namespace
		parts[0] + "." + parts[1] + "." + leaseIDEncoding.EncodeToString([]byte("a\x01")) + "." + parts[3], // control char in key
		parts[0] + "." + parts[1] + "." + parts[2] + "." + strings.Repeat("!", 22),
		parts[0] + "." + parts[1] + "=." + parts[2] + "." + parts[3], // padding
	} {
		if _, _, _, ok := ParseLeaseID(id); ok {
			t.Errorf("ParseLeaseID(%q) accepted", id)
		}
	}
}

func TestValidNamespaceAndKey(t *testing.T) {
	for ns, want := range map[string]bool{
		"a": true, "A.b_c-d9": true, "9": true, strings.Repeat("x", 128): true,
		"": false, ".a": false, "_a": false, "-a": false, "a b": false, "a/b": false, "ä": false, strings.Repeat("x", 129): false,
	} {
		if got := ValidNamespace(ns); got != want {
			t.Errorf("ValidNamespace(%q) = %v", ns, got)
		}
	}
	for key, want := range map[string]bool{
		"a": true, "user 1": true, "ü✓": true, strings.Repeat("k", 512): true, strings.Repeat("ü", 256): true,
		"": false, "a\x00": false, "\t": false, "a\x7f": false, "\u0085": false, "\xff": false, strings.Repeat("k", 513): false,
	} {
		if got := ValidKey(key); got != want {
			t.Errorf("ValidKey(%q) = %v", key, got)
		}
	}
}

func TestDayAndMonth(t *testing.T) {
	d := DayOf(1795305600000 + 5) // 2026-11-22T00:00:00.005Z
	if d.String() != "2026-11-22" || d.Month().String() != "2026-11" {
		t.Fatalf("day %s month %s", d, d.Month())
	}
	if DayOf(-1).String() != "1969-12-31" {
		t.Fatalf("DayOf(-1) = %s", DayOf(-1))
	}
	m := d.Month()
	if m.End().Format("2006-01-02") != "2026-12-01" || (m+2).String() != "2027-01" {
		t.Fatalf("month end %s, +2 %s", m.End(), m+2)
	}
}
