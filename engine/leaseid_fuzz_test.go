package engine

import (
	"strings"
	"testing"
)

// leaseToken makes a lease token from any bytes, as newLeaseToken does from random ones.
func leaseToken(b []byte) string {
	var t [leaseTokenBytes]byte
	copy(t[:], b)
	return leaseIDEncoding.EncodeToString(t[:])
}

// FuzzLeaseID checks that an id names the lease it was issued for: for every namespace
// and key a lease can be taken on (and every token), ParseLeaseID returns exactly the
// namespace, key and token FormatLeaseID was given; for a namespace or key no lease can
// be taken on, the id does not parse. A token string that is not one newLeaseToken could
// return never parses either.
func FuzzLeaseID(f *testing.F) {
	for _, s := range []struct{ ns, key, tok string }{
		{"api", "user-42", "0123456789abcdef"},
		{"a", "b", ""},
		{"A.b_c-d9", "user:42/ünïcode ✓ \u2028", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"},
		{"ns", "a.b.c", "l1.x.y.z"},
		{"ns", "", "0123456789abcdef"},
		{"", "k", "0123456789abcdef"},
		{"-ns", "k", "0123456789abcdef"},
		{"ns", "a\x00b", "0123456789abcdef"},
		{"ns", "\xff", "0123456789abcdef"},
		{"ns", "\u0085", "0123456789abcdef"},
		{strings.Repeat("n", 128), strings.Repeat("k", 512), "AAAAAAAAAAAAAAAAAAAAAA"},
		{strings.Repeat("n", 129), strings.Repeat("k", 513), "AAAAAAAAAAAAAAAAAAAAAB"},
	} {
		f.Add(s.ns, s.key, []byte(s.tok))
	}
	f.Fuzz(func(t *testing.T, ns, key string, raw []byte) {
		leasable := ValidNamespace(ns) && ValidKey(key)
		tok := leaseToken(raw)
		id := FormatLeaseID(ns, key, tok)
		gotNS, gotKey, gotTok, ok := ParseLeaseID(id)
		switch {
		case ok != leasable:
			t.Fatalf("ParseLeaseID(FormatLeaseID(%q, %q, %q)) ok = %v; a lease can be taken there: %v", ns, key, tok, ok, leasable)
		case ok && (gotNS != ns || gotKey != key || gotTok != tok):
			t.Fatalf("ParseLeaseID(%q) = %q, %q, %q; issued for %q, %q, %q", id, gotNS, gotKey, gotTok, ns, key, tok)
		}

		// The raw bytes as the token itself: accepted only if they are a token's text.
		_, _, gotTok, ok = ParseLeaseID(FormatLeaseID(ns, key, string(raw)))
		isToken := len(raw) == leaseTokenChars && leaseToken(mustDecode(raw)) == string(raw)
		if ok != (leasable && isToken) || ok && gotTok != string(raw) {
			t.Fatalf("token %q: parsed %v (%q); leasable %v, a token's text %v", raw, ok, gotTok, leasable, isToken)
		}
	})
}

func mustDecode(s []byte) []byte {
	b, err := leaseIDEncoding.DecodeString(string(s))
	if err != nil {
		return nil
	}
	return b
}

// FuzzParseLeaseID checks that ParseLeaseID accepts only ids FormatLeaseID makes: an id
// that parses re-formats to itself byte for byte (so one lease has exactly one id, with
// no aliases through padding, other alphabets or non-canonical base64), names a namespace
// and key a lease can be taken on, and carries a 128-bit token.
func FuzzParseLeaseID(f *testing.F) {
	good := FormatLeaseID("api", "user-42", leaseToken([]byte("0123456789abcdef")))
	parts := strings.Split(good, ".")
	for _, id := range []string{
		good,
		"",
		"l1.",
		"l1...",
		"L1." + strings.Join(parts[1:], "."),
		good + "=",
		good[:len(good)-1] + "B", // the last token character's unused bits set
		parts[0] + "." + parts[1] + "==." + parts[2] + "." + parts[3],
		parts[0] + "." + strings.ReplaceAll(leaseIDEncoding.EncodeToString([]byte("a?>")), "_", "/") + "." + parts[2] + "." + parts[3],
		parts[0] + "." + parts[1] + "." + parts[2] + "." + parts[3] + "." + parts[3],
		FormatLeaseID("a", "b.c", leaseToken(nil)),
		FormatLeaseID("ns", "\x7f", leaseToken(nil)),
		FormatLeaseID(".ns", "k", leaseToken(nil)),
	} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ns, key, tok, ok := ParseLeaseID(id)
		if !ok {
			if ns != "" || key != "" || tok != "" {
				t.Fatalf("ParseLeaseID(%q) rejected it but returned %q, %q, %q", id, ns, key, tok)
			}
			return
		}
		if again := FormatLeaseID(ns, key, tok); again != id {
			t.Fatalf("ParseLeaseID(%q) = %q, %q, %q, which format as %q", id, ns, key, tok, again)
		}
		if !ValidNamespace(ns) || !ValidKey(key) {
			t.Fatalf("ParseLeaseID(%q) accepted namespace %q, key %q", id, ns, key)
		}
		if raw := mustDecode([]byte(tok)); len(raw) != leaseTokenBytes || leaseToken(raw) != tok {
			t.Fatalf("ParseLeaseID(%q) accepted token %q", id, tok)
		}
	})
}
