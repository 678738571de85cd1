package domains

import (
	"crypto/sha256"
	"encoding/hex"
	"unicode/utf8"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/engine"
)

// CounterKey returns the /v1 key of the counter a descriptor's entries spend, so a
// POST /v1/limit call with namespace = domain and this key shares the counter.
//
// Each entry is written key=value; entries are joined with "&" in request order. In keys
// and values the bytes '%', '=', '&', control characters (below 0x20, 0x7f, and the bytes of
// U+0080-U+009F) and bytes that are not UTF-8 are written as %XX (upper-case hex); every
// other character is itself.
// An entry list whose encoding is longer than 512 bytes (engine.MaxKey) becomes
// "sha256:" followed by the 64 hex digits of the SHA-256 of that encoding.
//
// Examples: [{remote_address 10.0.0.1}] → "remote_address=10.0.0.1";
// [{user alice} {path /a&b}] → "user=alice&path=/a%26b".
//
// Distinct entry lists have distinct keys (FuzzCounterKey checks it). entries must not be
// empty: a descriptor without entries spends no counter.
func CounterKey(entries []descriptors.Entry) string {
	n := 0
	for _, e := range entries {
		n += len(e.Key) + len(e.Value) + 2
	}
	var buf [256]byte
	b := buf[:0]
	if n > len(buf) {
		b = make([]byte, 0, n)
	}
	for i, e := range entries {
		if i > 0 {
			b = append(b, '&')
		}
		b = appendEscaped(b, e.Key)
		b = append(b, '=')
		b = appendEscaped(b, e.Value)
	}
	if len(b) > engine.MaxKey {
		sum := sha256.Sum256(b)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	return string(b)
}

func appendEscaped(b []byte, s string) []byte {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if (r != utf8.RuneError || size > 1) && (r < 0x80 || r > 0x9f) {
				b = append(b, s[i:i+size]...)
				i += size
				continue
			}
		} else if c >= 0x20 && c != 0x7f && c != '%' && c != '=' && c != '&' {
			b = append(b, c)
			i++
			continue
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		i++
	}
	return b
}
