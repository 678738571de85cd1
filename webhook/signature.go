// Package webhook delivers Leash's webhook events (spec §8) from the store's outbox
// (Deliverer, deliver.go). The Leash-Signature header it sends is made by package
// webhook/signature, which receivers import to verify deliveries without compiling the
// engine; the names below forward to it.
package webhook

import (
	"time"

	"github.com/leashd/leash/webhook/signature"
)

// SignatureHeader is the header that carries a delivery's signature.
const SignatureHeader = signature.Header

// Errors Verify returns (the same values as package signature's).
var (
	ErrNoSignature  = signature.ErrNoSignature
	ErrBadSignature = signature.ErrBadSignature
	ErrExpired      = signature.ErrExpired
)

// Sign returns the Leash-Signature header value for body sent at t (signature.Sign).
func Sign(secret string, t time.Time, body []byte) string { return signature.Sign(secret, t, body) }

// Verify checks a delivery's header against its body (signature.Verify); a receiver
// should import webhook/signature instead, which does not compile the engine.
func Verify(secret, header string, body []byte, tolerance time.Duration) error {
	return signature.Verify(secret, header, body, tolerance)
}
