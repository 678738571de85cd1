// Package clientip finds a request's client address behind trusted proxies (spec §15.7).
// Without trusted proxies the client is the connection's peer and forwarded headers are
// never read. When the peer is a trusted proxy, the client is the right-most address of
// X-Forwarded-For (or, without that header, of Forwarded's for= parameters) that is not
// itself a trusted proxy: the addresses to its right were appended by proxies we trust,
// those to its left were sent by the client and could be anything. It imports only the
// standard library.
package clientip

import (
	"net/http"
	"net/netip"
	"strings"
)

// maxForwardedHops bounds how many entries of a forwarded header are read, from the right.
const maxForwardedHops = 64

// Proxies are the trusted proxies (http.trusted_proxies); none: the client is the peer.
type Proxies []netip.Prefix

func (t Proxies) trusts(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Client returns the request's client address: the peer, or behind a trusted proxy the
// address the proxies forwarded. An entry that is not an address where the client should
// be (e.g. "unknown") leaves the client unknown: the peer's address is used. It is the
// zero Addr when the peer's address cannot be read.
func (t Proxies) Client(r *http.Request) netip.Addr {
	peer := peerAddr(r)
	if len(t) == 0 || !peer.IsValid() || !t.trusts(peer) {
		return peer
	}
	hops := forwardedHops(r)
	if len(hops) == 0 {
		return peer
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a := hops[i]
		if !a.IsValid() {
			return peer
		}
		if !t.trusts(a) {
			return a
		}
	}
	return hops[0] // every hop is a trusted proxy: the first one made the request
}

// peerAddr is the request's peer address (the connection's, not a header's), IPv4 in
// IPv6 unmapped; the zero Addr when it cannot be read.
func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// forwardedHops returns, left to right, at most maxForwardedHops of the last addresses of
// X-Forwarded-For, or of Forwarded's for= parameters when there is no X-Forwarded-For; an
// entry that is not an address is the zero Addr.
func forwardedHops(r *http.Request) []netip.Addr {
	var items []string
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		for _, line := range xff {
			items = append(items, strings.Split(line, ",")...)
		}
	} else {
		for _, line := range r.Header.Values("Forwarded") {
			for _, elem := range strings.Split(line, ",") {
				v := ""
				for _, pair := range strings.Split(elem, ";") {
					k, val, _ := strings.Cut(strings.TrimSpace(pair), "=")
					if strings.EqualFold(k, "for") {
						v = val
					}
				}
				items = append(items, v)
			}
		}
	}
	if len(items) > maxForwardedHops {
		items = items[len(items)-maxForwardedHops:]
	}
	out := make([]netip.Addr, len(items))
	for i, it := range items {
		out[i] = parseHop(it)
	}
	return out
}

// parseHop reads one forwarded address: 192.0.2.1, 192.0.2.1:80, 2001:db8::1,
// [2001:db8::1] or [2001:db8::1]:80, optionally quoted; IPv4-mapped IPv6 as IPv4.
func parseHop(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap()
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap()
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Zone() == "" {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}
