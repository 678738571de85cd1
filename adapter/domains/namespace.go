package domains

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/leashd/leash/engine"
)

// Namespace is the namespace an Envoy domain's counters and usage live in (spec §9.1): the
// domain itself when it is a valid namespace; otherwise (Envoy Gateway's
// "namespace/gateway/listener", say) the domain with every character outside A-Z, a-z,
// 0-9, '.', '_' and '-' written '.', cut to 100 bytes, prefixed with "d" when it does not
// start with a letter or digit, then "-" and the first 12 hex digits of the domain's
// SHA-256, so distinct domains get distinct namespaces. "default/eg/http" becomes
// "default.eg.http-" and 12 hex digits.
func Namespace(domain string) string {
	if engine.ValidNamespace(domain) {
		return domain
	}
	var b strings.Builder
	for i := 0; i < len(domain) && b.Len() < 100; i++ {
		c := domain[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else if c < 0x80 || c >= 0xC0 { // one '.' per character: skip UTF-8 continuation bytes
			b.WriteByte('.')
		}
	}
	s := b.String()
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z' || s[0] >= '0' && s[0] <= '9') {
		s = "d" + s
	}
	sum := sha256.Sum256([]byte(domain))
	return s + "-" + hex.EncodeToString(sum[:6])
}
