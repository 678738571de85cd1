package domains_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/engine"
)

// entriesFrom reads a descriptor's entries from fuzz bytes: a length byte and that many
// bytes of key, a length byte and that many bytes of value, again and again. A length
// byte of 0x80 or more takes its low 7 bits as the length and repeats those bytes 8
// times, so that short inputs reach the long keys that are hashed.
func entriesFrom(b []byte) []descriptors.Entry {
	var out []descriptors.Entry
	field := func() string {
		if len(b) == 0 {
			return ""
		}
		n := min(int(b[0]&0x7f), len(b)-1)
		s := string(b[1 : 1+n])
		if b[0] >= 0x80 {
			s = strings.Repeat(s, 8)
		}
		b = b[1+n:]
		return s
	}
	for len(b) > 0 {
		k := field()
		out = append(out, descriptors.Entry{Key: k, Value: field()})
	}
	return out
}

// refEncode is the encoding docs/envoy.md documents, before the SHA-256 rule: entries
// key=value joined by "&", with '%', '=', '&', control characters (C0, DEL, C1) and bytes
// that are not UTF-8 written %XX.
func refEncode(entries []descriptors.Entry) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('&')
		}
		refEscape(&b, e.Key)
		b.WriteByte('=')
		refEscape(&b, e.Value)
	}
	return b.String()
}

func refEscape(b *strings.Builder, s string) {
	for s != "" {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1, r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r == '%', r == '=', r == '&':
			for i := 0; i < n; i++ {
				fmt.Fprintf(b, "%%%02X", s[i])
			}
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
}

// decodeKey reads entries back from an encoding that was not hashed; ok is false if key
// is not one.
func decodeKey(key string) ([]descriptors.Entry, bool) {
	var out []descriptors.Entry
	for part := range strings.SplitSeq(key, "&") {
		k, v, found := strings.Cut(part, "=")
		if !found || strings.Contains(v, "=") {
			return nil, false
		}
		k, ok1 := unescape(k)
		v, ok2 := unescape(v)
		if !ok1 || !ok2 {
			return nil, false
		}
		out = append(out, descriptors.Entry{Key: k, Value: v})
	}
	return out, true
}

func unescape(s string) (string, bool) {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := hex.DecodeString(s[i+1 : i+3])
		if err != nil || strings.ToUpper(s[i+1:i+3]) != s[i+1:i+3] {
			return "", false
		}
		b = append(b, v[0])
		i += 2
	}
	return string(b), true
}

// FuzzCounterKey checks the descriptor-to-key encoding on two entry lists: each key is a
// valid /v1 key, the same on every call, the documented encoding (or its SHA-256 over 512
// bytes) that decodes back to the entries, and the two keys are equal only if the lists
// are. The input lists are not modified.
func FuzzCounterKey(f *testing.F) {
	enc := func(es ...string) []byte {
		var b []byte
		for _, s := range es {
			b = append(append(b, byte(len(s))), s...)
		}
		return b
	}
	long := func(s string) []byte { return append([]byte{0x80 | byte(len(s))}, s...) } // s 8 times
	for _, pair := range [][2][]byte{
		{enc("remote_address", "10.0.0.1"), enc("remote_address", "10.0.0.2")},
		{enc("user", "alice", "path", "/login"), enc("user", "alice&path=/login")},
		{enc("a", "b=c"), enc("a=b", "c")},
		{enc("k", "%26"), enc("k", "&")},
		{enc("k", "caf\u00e9 \u0085 \xff\xc2"), enc("k", "caf\u00e9 %C2%85 %FF%C2")},
		{enc("", ""), enc("", "", "", "")},
		{append(enc("k"), long(strings.Repeat("v", 63))...), append(enc("k"), long(strings.Repeat("v", 64))...)},
		{append(long("\x00&=%\u0085"), 0), append(long("\x00&=%\u0085"), 1, 'x')},
		{enc("sha256:", strings.Repeat("0", 64)), enc("k", "\x00\x1f\x7f")},
	} {
		f.Add(pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ea, eb := entriesFrom(a), entriesFrom(b)
		if len(ea) == 0 || len(eb) == 0 {
			return // a descriptor with no entries is answered without a counter
		}
		ka, kb := checkCounterKey(t, ea), checkCounterKey(t, eb)
		if (ka == kb) != slices.Equal(ea, eb) {
			t.Fatalf("CounterKey(%q) = %q and CounterKey(%q) = %q", ea, ka, eb, kb)
		}
	})
}

func checkCounterKey(t *testing.T, entries []descriptors.Entry) string {
	orig := slices.Clone(entries)
	key := domains.CounterKey(entries)
	if !slices.Equal(entries, orig) {
		t.Fatalf("CounterKey modified its entries: %q, was %q", entries, orig)
	}
	if !engine.ValidKey(key) {
		t.Fatalf("CounterKey(%q) = %q, not a valid /v1 key", entries, key)
	}
	if again := domains.CounterKey(entries); again != key {
		t.Fatalf("CounterKey(%q) = %q, then %q", entries, key, again)
	}
	plain := refEncode(entries)
	if len(plain) > engine.MaxKey {
		sum := sha256.Sum256([]byte(plain))
		if want := "sha256:" + hex.EncodeToString(sum[:]); key != want {
			t.Fatalf("CounterKey(%q) = %q, want %q (the SHA-256 of %q)", entries, key, want, plain)
		}
		return key
	}
	if key != plain {
		t.Fatalf("CounterKey(%q) = %q, want %q", entries, key, plain)
	}
	if back, ok := decodeKey(key); !ok || !slices.Equal(back, entries) {
		t.Fatalf("CounterKey(%q) = %q, which decodes to %q", entries, key, back)
	}
	return key
}
