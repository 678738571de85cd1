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
	leaseIDPrefix  = "l1."
	leaseTokenLen  = 22
	leaseTokenSize = 16
)

var b64 = base64.RawURLEncoding

// newLeaseToken returns a fresh random lease token.
func newLeaseToken() string {
	var b [leaseTokenSize]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return b64.EncodeToString(b[:])
}

// FormatLeaseID builds the id of the lease token on (namespace, key).
func FormatLeaseID(namespace, key, token string) string {
	return leaseIDPrefix + b64.EncodeToString([]byte(namespace)) + "." + b64.EncodeToString([]byte(key)) + "." + token
}

// ParseLeaseID splits an id made by FormatLeaseID; ok is false for anything else.
func ParseLeaseID(id string) (namespace, key, token string, ok bool) {
	rest, found := strings.CutPrefix(id, leaseIDPrefix)
	if !found {
		return "", "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || len(parts[2]) != leaseTokenLen {
		return "", "", "", false
	}
	ns, err := b64.DecodeString(parts[0])
	if err != nil {
		return "", "", "", false
	}
	k, err := b64.DecodeString(parts[1])
	if err != nil {
		return "", "", "", false
	}
	tok, err := b64.DecodeString(parts[2])
	if err != nil || len(tok) != leaseTokenSize {
		return "", "", "", false
	}
	// Re-encoding must give back the same text, so one lease has exactly one id.
	if b64.EncodeToString(ns) != parts[0] || b64.EncodeToString(k) != parts[1] || b64.EncodeToString(tok) != parts[2] {
		return "", "", "", false
	}
	if !ValidNamespace(string(ns)) || !ValidKey(string(k)) {
		return "", "", "", false
	}
	return string(ns), string(k), parts[2], true
}
