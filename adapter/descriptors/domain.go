package descriptors

import (
	"unicode"
	"unicode/utf8"
)

// MaxDomain is the longest domain, in bytes (spec §9.1).
const MaxDomain = 256

// ValidDomain reports whether d can be an Envoy domain: 1 to MaxDomain bytes of valid
// UTF-8 without control characters. A domain that is not also a valid namespace (Envoy
// Gateway names its domains namespace/gateway/listener) counts in the namespace
// domains.Namespace derives from it (spec §9.1).
func ValidDomain(d string) bool {
	if d == "" || len(d) > MaxDomain || !utf8.ValidString(d) {
		return false
	}
	for _, r := range d {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
