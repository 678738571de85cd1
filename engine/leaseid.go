package engine

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
)

// A lease id is "l1.<ns>.<key>.<token>": namespace and key in unpadded base64url so the
// id finds its lease set, and a 128-bit random token (22 base64url characters) that makes
// it unguessable. The account is never in the id: it always comes from the API key.
const (
	leaseIDPrefix   = "l1."
	leaseTokenChars = 22 // a token in base64url
	leaseTokenBytes = 16 // a token decoded
)

// leaseIDEncoding encodes the parts of a lease id.
var leaseIDEncoding = base64.RawURLEncoding

// NewLeaseToken returns a fresh random lease token.
func NewLeaseToken() string {
	var b [leaseTokenBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return leaseIDEncoding.EncodeToString(b[:])
}

// FormatLeaseID builds the id of the lease token on (namespace, key).
func FormatLeaseID(namespace, key, token string) string {
	return leaseIDPrefix + leaseIDEncoding.EncodeToString([]byte(namespace)) + "." + leaseIDEncoding.EncodeToString([]byte(key)) + "." + token
}

// ParseLeaseID splits an id made by FormatLeaseID; ok is false for anything else.
func ParseLeaseID(id string) (namespace, key, token string, ok bool) {
	rest, found := strings.CutPrefix(id, leaseIDPrefix)
	if !found {
		return "", "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || len(parts[2]) != leaseTokenChars {
		return "", "", "", false
	}
	ns, err := leaseIDEncoding.DecodeString(parts[0])
	if err != nil {
		return "", "", "", false
	}
	k, err := leaseIDEncoding.DecodeString(parts[1])
	if err != nil {
		return "", "", "", false
	}
	tok, err := leaseIDEncoding.DecodeString(parts[2])
	if err != nil || len(tok) != leaseTokenBytes {
		return "", "", "", false
	}
	// Re-encoding must give back the same text, so one lease has exactly one id.
	if leaseIDEncoding.EncodeToString(ns) != parts[0] || leaseIDEncoding.EncodeToString(k) != parts[1] || leaseIDEncoding.EncodeToString(tok) != parts[2] {
		return "", "", "", false
	}
	if !ValidNamespace(string(ns)) || !ValidKey(string(k)) {
		return "", "", "", false
	}
	return string(ns), string(k), parts[2], true
}
