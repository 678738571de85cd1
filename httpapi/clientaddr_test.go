package httpapi_test

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
)

// Behind trusted proxies each client is told apart by the address its proxy forwarded: an
// attacker sending wrong keys through the proxy is slowed while a valid client through the
// same proxy gets only 200s, and a client cannot pass itself off as another by sending its
// own X-Forwarded-For (spec §15.7).
func TestAuthThrottleBehindTrustedProxies(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) // the guard's clock stands still
	e := newAdminEnvWith(t, func() time.Time { return at }, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	const proxy = "10.1.2.3:40000"
	// The attacker forges a left-hand entry naming the valid client; the proxies append
	// what they saw (the attacker's own address) to its right.
	attacker := http.Header{"X-Forwarded-For": {"198.51.100.7, 203.0.113.66, 10.9.9.9"}}
	valid := http.Header{"X-Forwarded-For": {"198.51.100.7"}}
	fwdValid := http.Header{"Forwarded": {`for="[2001:db8::7]:4711";proto=https, for=10.2.2.2`}}
	codes := map[int]int{}
	for i := range 500 {
		status, out, _ := e.callWith(proxy, attacker, "POST", "/v1/limit", "bad-key", limitBody)
		codes[status]++
		if status == 429 && out["code"] != "too_many_auth_failures" {
			t.Fatalf("429 %v", out)
		}
		for _, h := range []http.Header{valid, fwdValid} {
			if s, out, _ := e.callWith(proxy, h, "POST", "/v1/limit", keyConfig, limitBody); s != 200 {
				t.Fatalf("a valid client through the proxy after %d bad keys: %d %v", i+1, s, out)
			}
		}
	}
	if codes[401] != engine.AuthFailureBurst || codes[429] != 500-engine.AuthFailureBurst {
		t.Errorf("the attacker's answers %v: want %d 401s, the rest 429", codes, engine.AuthFailureBurst)
	}
	// The proxy itself (no forwarded header) is a client of its own, not slowed.
	if s, out, _ := e.callWith(proxy, nil, "POST", "/v1/limit", keyConfig, limitBody); s != 200 {
		t.Errorf("the proxy's own call: %d %v", s, out)
	}
}

// Without trusted proxies forwarded headers change nothing: the peer is the client, so
// varying X-Forwarded-For or Forwarded does not escape the throttle.
func TestForwardedHeadersIgnoredWithoutTrustedProxies(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	e := newAdminEnvAt(t, func() time.Time { return at })
	const peer = "10.1.2.3:40000"
	for i := range 100 {
		h := http.Header{"X-Forwarded-For": {netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}).String()},
			"Forwarded": {"for=" + netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}).String()}}
		status, _, _ := e.callWith(peer, h, "POST", "/v1/limit", "bad-key", limitBody)
		if want := 401; i >= engine.AuthFailureBurst {
			want = 429
			if status != want {
				t.Fatalf("bad key %d with a fresh X-Forwarded-For: %d, want %d", i+1, status, want)
			}
		}
	}
	if s, _, _ := e.callWith(peer, http.Header{"X-Forwarded-For": {"192.0.2.1"}}, "POST", "/v1/limit", keyConfig, limitBody); s != 429 {
		t.Errorf("a good key from the slowed peer claiming another address: %d, want 429", s)
	}
}

// An untrusted peer's headers are ignored even when proxies are configured; an entry
// that is not an address where the client should be leaves the proxy as the client.
func TestForwardedFromUntrustedPeerIgnored(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	e := newAdminEnvWith(t, func() time.Time { return at }, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	for i := range engine.AuthFailureBurst + 1 {
		h := http.Header{"X-Forwarded-For": {netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}).String()}}
		e.callWith("192.0.2.50:1000", h, "POST", "/v1/limit", "bad-key", limitBody)
	}
	if s, _, _ := e.callWith("192.0.2.50:1000", http.Header{"X-Forwarded-For": {"198.51.100.200"}}, "POST", "/v1/limit", keyConfig, limitBody); s != 429 {
		t.Errorf("an untrusted peer escaped the throttle with X-Forwarded-For: %d", s)
	}
	for range engine.AuthFailureBurst + 1 {
		e.callWith("10.0.0.1:1000", http.Header{"X-Forwarded-For": {"unknown"}}, "POST", "/v1/limit", "bad-key", limitBody)
	}
	if s, _, _ := e.callWith("10.0.0.1:1000", nil, "POST", "/v1/limit", keyConfig, limitBody); s != 429 {
		t.Errorf("an unknown forwarded client was not counted against the proxy: %d", s)
	}
}
