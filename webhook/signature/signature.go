// Package signature signs and verifies the Leash-Signature header of webhook deliveries
// (spec §8.4, §8.6, §13.4). It imports only the standard library, so a receiver can use it without
// compiling Leash's engine or stores; the sender (package webhook) uses the same code.
// A receiver in Go:
//
//	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
//	if err := signature.Verify(secret, r.Header.Get(signature.Header), body, 5*time.Minute); err != nil {
//		http.Error(w, "bad signature", http.StatusBadRequest)
//		return
//	}
//
// The header is "t=<unix seconds>,v1=<hex>", where <hex> is HMAC-SHA256 keyed with the
// bytes of the secret string exactly as PUT /v1/webhook returned it, over "<t>.<body>".
// The same check in a shell, with the header's t and the raw body in body.json:
//
//	printf '%s.' "$t" | cat - body.json | openssl dgst -sha256 -hmac "$secret" -hex
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header is the header that carries a delivery's signature.
const Header = "Leash-Signature"

// Errors Verify returns.
var (
	ErrNoSignature  = errors.New("signature: no t= and v1= in the signature header")
	ErrBadSignature = errors.New("signature: signature does not match the body")
	ErrExpired      = errors.New("signature: signature timestamp outside the tolerance")
)

// Sign returns the Leash-Signature header value for body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// Verify checks header against body and secret: one v1 value must be the HMAC of
// "<t>.<body>", and t must be within tolerance of now (0: any age).
func Verify(secret, header string, body []byte, tolerance time.Duration) error {
	return verifyAt(secret, header, body, tolerance, time.Now())
}

func verifyAt(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	matched := false
	for _, s := range sigs {
		matched = matched || hmac.Equal(s, want)
	}
	if !matched {
		return ErrBadSignature
	}
	if tolerance > 0 {
		if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
			return ErrExpired
		}
	}
	return nil
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
