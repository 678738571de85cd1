package clientip_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/leashd/leash/httpapi/clientip"
	"github.com/leashd/leash/testkit"
)

// TestStdlibOnly: the package compiles no engine, store or third-party code.
func TestStdlibOnly(t *testing.T) {
	testkit.StdlibOnly(t, "github.com/leashd/leash/httpapi/clientip")
}

var proxies = clientip.Proxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}

// request builds a request from peer carrying the header lines, each "Name: value".
func request(peer string, lines ...string) *http.Request {
	r := httptest.NewRequest("GET", "/v1/limit", nil)
	r.RemoteAddr = peer
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ": ")
		r.Header.Add(k, v)
	}
	return r
}

// The client address of spec §15.7, case by case: which entry of which header is believed,
// and when the peer is the client.
func TestClient(t *testing.T) {
	cases := []struct {
		name    string
		proxies clientip.Proxies
		peer    string
		headers []string
		want    string // "" for the zero Addr
	}{
		{"no proxies: the peer, headers unread", nil, "10.1.2.3:4000", []string{"X-Forwarded-For: 198.51.100.7", "Forwarded: for=198.51.100.8"}, "10.1.2.3"},
		{"untrusted peer: headers ignored", proxies, "192.0.2.50:1000", []string{"X-Forwarded-For: 198.51.100.7"}, "192.0.2.50"},
		{"trusted peer, no header: the peer", proxies, "10.1.2.3:4000", nil, "10.1.2.3"},
		{"right-most untrusted entry", proxies, "10.1.2.3:4000", []string{"X-Forwarded-For: 198.51.100.7, 203.0.113.66, 10.9.9.9"}, "203.0.113.66"},
		{"several X-Forwarded-For lines, in order", proxies, "10.1.2.3:4000", []string{"X-Forwarded-For: 198.51.100.7", "X-Forwarded-For: 203.0.113.66, 10.9.9.9"}, "203.0.113.66"},
		{"entries with ports and brackets", proxies, "10.1.2.3:4000", []string{"X-Forwarded-For: 192.0.2.9:443, [2001:db8::7]:80"}, "2001:db8::7"},
		{"IPv4-mapped entry unmapped", proxies, "10.1.2.3:4000", []string{"X-Forwarded-For: ::ffff:198.51.100.7"}, "198.51.100.7"},
		{"IPv4-mapped peer unmapped and trusted", proxies, "[::ffff:10.1.2.3]:4000", []string{"X-Forwarded-For: 198.51.100.7"}, "198.51.100.7"},
		{"trusted IPv6 peer", proxies, "[2001:db8:ffff::1]:4000", []string{"X-Forwarded-For: 2001:db8::9"}, "2001:db8::9"},
		{"Forwarded for=, quoted, bracketed, with port", proxies, "10.1.2.3:4000", []string{`Forwarded: for="[2001:db8::7]:4711";proto=https, for=10.2.2.2`}, "2001:db8::7"},
		{"Forwarded parameter names in any case", proxies, "10.1.2.3:4000", []string{"Forwarded: proto=https;For=198.51.100.7"}, "198.51.100.7"},
		{"Forwarded several lines", proxies, "10.1.2.3:4000", []string{"Forwarded: for=198.51.100.7", "Forwarded: for=203.0.113.66;by=10.0.0.1"}, "203.0.113.66"},
		{"X-Forwarded-For wins over Forwarded", proxies, "10.1.2.3:4000", []string{"Forwarded: for=198.51.100.8", "X-Forwarded-For: 198.51.100.7"}, "198.51.100.7"},
		{"every entry trusted: the first", proxies, "10.1.2.3:4000", []string{"X-Forwarded-For: 10.5.5.5, 10.6.6.6"}, "10.5.5.5"},
		{"unknown where the client should be: the peer", proxies, "10.1.2.3:4000", []string{"X-Forwarded-For: 198.51.100.7, unknown, 10.9.9.9"}, "10.1.2.3"},
		{"unknown left of the client: not read", proxies, "10.1.2.3:4000", []string{"X-Forwarded-For: unknown, 198.51.100.7"}, "198.51.100.7"},
		{"obfuscated Forwarded name: the peer", proxies, "10.1.2.3:4000", []string{"Forwarded: for=_hidden"}, "10.1.2.3"},
		{"Forwarded element without for=: the peer", proxies, "10.1.2.3:4000", []string{"Forwarded: for=198.51.100.7, proto=https"}, "10.1.2.3"},
		{"empty X-Forwarded-For entry: the peer", proxies, "10.1.2.3:4000", []string{"X-Forwarded-For: 198.51.100.7,"}, "10.1.2.3"},
		{"zoned entry is not an address: the peer", proxies, "10.1.2.3:4000", []string{"X-Forwarded-For: fe80::1%eth0"}, "10.1.2.3"},
		{"unreadable peer: zero", proxies, "not-an-address", []string{"X-Forwarded-For: 198.51.100.7"}, ""},
		{"unreadable peer without proxies: zero", nil, "", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.proxies.Client(request(c.peer, c.headers...))
			var want netip.Addr
			if c.want != "" {
				want = netip.MustParseAddr(c.want)
			}
			if got != want {
				t.Errorf("Client = %v, want %v", got, want)
			}
		})
	}
}

// Only the last 64 entries of a forwarded header are read: an address further left is
// never the client, even when everything to its right is a trusted proxy.
func TestClientReadsAtMost64Hops(t *testing.T) {
	hops := []string{"198.51.100.7"}
	for i := range 64 {
		hops = append(hops, netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}).String())
	}
	r := request("10.1.2.3:4000", "X-Forwarded-For: "+strings.Join(hops, ", "))
	if got, want := proxies.Client(r), netip.MustParseAddr("10.0.0.1"); got != want {
		t.Errorf("65 entries: Client = %v, want %v (the left-most of the last 64)", got, want)
	}
	r = request("10.1.2.3:4000", "X-Forwarded-For: "+strings.Join(hops[:64], ", "))
	if got, want := proxies.Client(r), netip.MustParseAddr("198.51.100.7"); got != want {
		t.Errorf("64 entries: Client = %v, want %v", got, want)
	}
}
