// Package ssrf screens webhook target URLs so that deliveries cannot be
// aimed at internal services (server-side request forgery).
//
// [Policy.CheckURL] admits a URL only if all of these hold:
//
//   - the scheme is https, or http when [Policy.AllowHTTP] is set;
//   - there is no userinfo, and the URL is at most 2048 bytes long;
//   - the port, if any, is between 1 and 65535;
//   - the host is not localhost, nor a name under .localhost, .local or
//     .internal (which covers metadata.google.internal); case and a
//     trailing dot do not matter;
//   - the host is an IP literal or an ASCII host name (internationalized
//     names must be given in their xn-- form) with at least two labels;
//     single-label names are admitted only with [Policy.AllowPrivateTargets],
//     as they may be expanded by the resolver's search domains;
//   - every address the host stands for is allowed by [Policy.AllowedAddr]:
//     the address of an IP literal, or every address a name resolves to.
//     A name that does not resolve is rejected.
//
// IP literals are recognized in every spelling that browsers and the C
// library accept: bracketed IPv6, with or without a zone (a zone is always
// rejected), and IPv4 in the inet_aton forms: one to four dot-separated
// parts, each decimal, hexadecimal (0x) or octal (leading 0), the last part
// filling the remaining bytes, so 2130706433, 0x7f000001, 0177.0.0.1 and
// 127.1 all mean 127.0.0.1. A host whose last label begins with a digit is
// taken to be such a literal; if it does not parse as one (999.1.1.1, 0x1g)
// it is rejected rather than looked up. Percent-encoded hosts are rejected
// by the URL parser unless the encoding is of non-ASCII bytes, which the
// ASCII rule then rejects.
//
// [Policy.AllowedAddr] blocks these addresses:
//
//   - unspecified and "this network": 0.0.0.0/8, ::/128;
//   - loopback: 127.0.0.0/8, ::1/128 (*);
//   - private: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 (*);
//   - unique-local: fc00::/7, including fd00:ec2::254 (*);
//   - link-local, where cloud metadata services live: 169.254.0.0/16
//     (169.254.169.254), fe80::/10; and Azure's platform address
//     168.63.129.16 (WireServer), public by number but served inside every
//     Azure virtual network;
//   - shared address space (CGNAT): 100.64.0.0/10;
//   - multicast: 224.0.0.0/4, ff00::/8;
//   - reserved and broadcast: 240.0.0.0/4, which holds 255.255.255.255;
//   - IETF special-purpose blocks: 192.0.0.0/24, the deprecated 6to4 relay
//     anycast 192.88.99.0/24, 2001::/23 (Teredo 2001::/32, benchmarking
//     2001:2::/48, ORCHID...), the local-use NAT64 prefix 64:ff9b:1::/48;
//   - documentation: 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
//     2001:db8::/32, 3fff::/20;
//   - benchmarking: 198.18.0.0/15;
//   - every IPv6 address outside global unicast 2000::/3 not otherwise
//     listed here, such as the discard prefix 100::/64, the deprecated
//     site-local fec0::/10 and IPv4-compatible ::a.b.c.d.
//
// IPv6 addresses that carry an IPv4 address are judged by the IPv4 address:
// IPv4-mapped ::ffff:a.b.c.d like the address itself, NAT64 64:ff9b::/96 and
// 6to4 2002::/16 admitted only if the embedded address is neither blocked
// nor private. The ranges marked (*) are admitted by
// [Policy.AllowPrivateTargets]; link-local never is.
//
// The same address rule runs again when a delivery connects, through
// [Policy.Control], so that a name re-resolving to a blocked address (DNS
// rebinding) is refused; the client from [Policy.Client] does that and
// follows no redirects.
package ssrf

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxURLLength is the length in bytes of the longest URL admitted.
const MaxURLLength = 2048

// Policy is what screening admits; the zero value is the production policy.
type Policy struct {
	AllowHTTP           bool // http:// URLs too (tests only)
	AllowPrivateTargets bool // loopback and private addresses (tests only); never link-local
}

// Resolver looks host names up; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Error says why a URL or a connection was rejected. Reason is safe to show
// to the API caller: it never includes resolved addresses.
type Error struct {
	Reason string
	// Relax is what would admit the URL for a local trial: RelaxNone, or a Policy field.
	Relax Relax
}

// Relax names what would admit a rejected URL for a local trial.
type Relax uint8

// What would admit a rejected URL.
const (
	RelaxNone        Relax = iota // nothing: the rule always holds
	RelaxHTTP                     // Policy.AllowHTTP
	RelaxPrivate                  // Policy.AllowPrivateTargets
	RelaxNameAddress              // a local name: its address instead, with Policy.AllowPrivateTargets
)

func (e *Error) Error() string { return "ssrf: " + e.Reason }

func reject(reason string) error { return &Error{Reason: reason} }

// rejectRelaxed is a rejection that relax would lift.
func rejectRelaxed(reason string, relax Relax) error { return &Error{Reason: reason, Relax: relax} }

// relaxFor is RelaxPrivate when Policy.AllowPrivateTargets would admit a, which p refuses.
func (p Policy) relaxFor(a netip.Addr) Relax {
	if !p.AllowPrivateTargets && (Policy{AllowPrivateTargets: true}).AllowedAddr(a) {
		return RelaxPrivate
	}
	return RelaxNone
}

// CheckURL parses raw and applies every rule of the package to it,
// resolving a host name with r (net.DefaultResolver if r is nil): every
// address the name resolves to must be allowed.
//
// On success it returns the parsed URL with its host in canonical form: a
// name in lower case without a trailing dot, an IP literal in its standard
// spelling (0x7f.1 becomes 127.0.0.1). Deliveries should go to that URL,
// so that they reach the address that was screened.
//
// A rejection is an *Error; if ctx ends during the lookup, the error is
// ctx.Err() instead.
func (p Policy) CheckURL(ctx context.Context, raw string, r Resolver) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, reject("URL is longer than " + strconv.Itoa(MaxURLLength) + " bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, reject("URL is malformed")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowHTTP:
	case p.AllowHTTP:
		return nil, reject("URL scheme must be https or http")
	default:
		if u.Scheme == "http" {
			return nil, rejectRelaxed("URL scheme must be https", RelaxHTTP)
		}
		return nil, reject("URL scheme must be https")
	}
	if u.User != nil {
		return nil, reject("URL must not contain userinfo")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, reject("URL has no host")
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, reject("URL port is out of range")
		}
		port = strconv.Itoa(n)
	}

	name, addr, err := p.parseHost(u)
	if err != nil {
		return nil, err
	}
	if addr.IsValid() {
		if !p.AllowedAddr(addr) {
			return nil, rejectRelaxed("host address is not allowed", p.relaxFor(addr))
		}
		name = addr.String()
		if addr.Is6() {
			name = "[" + name + "]"
		}
	} else if err := p.checkResolved(ctx, name, r); err != nil {
		return nil, err
	}

	if port != "" {
		name += ":" + port
	}
	u.Host = name
	if len(u.String()) > MaxURLLength {
		// The canonical form can be longer: 1.1 becomes 1.0.0.1.
		return nil, reject("URL is longer than " + strconv.Itoa(MaxURLLength) + " bytes")
	}
	return u, nil
}

// parseHost returns the IP address that u's host spells, or, if the host is
// a name, the name in canonical form.
func (p Policy) parseHost(u *url.URL) (name string, addr netip.Addr, err error) {
	host := strings.ToLower(u.Hostname())
	if strings.HasPrefix(u.Host, "[") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return "", netip.Addr{}, reject("host is not a valid IPv6 address")
		}
		if a.Zone() != "" {
			return "", netip.Addr{}, reject("host must not have an IPv6 zone")
		}
		return "", a, nil
	}

	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", netip.Addr{}, reject("URL has no host")
	}
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last != "" && '0' <= last[0] && last[0] <= '9' {
		a, ok := parseIPv4(host)
		if !ok {
			return "", netip.Addr{}, reject("host is not a valid IP address")
		}
		return "", a, nil
	}

	if !isASCII(host) {
		return "", netip.Addr{}, reject("host name must be ASCII (the xn-- form of an internationalized name)")
	}
	if !validName(host) {
		return "", netip.Addr{}, reject("host is not a valid host name")
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") ||
		strings.HasSuffix(host, ".local") || strings.HasSuffix(host, ".internal") {
		return "", netip.Addr{}, rejectRelaxed("host is a local name", RelaxNameAddress)
	}
	if !strings.Contains(host, ".") && !p.AllowPrivateTargets {
		return "", netip.Addr{}, rejectRelaxed("host must be a fully qualified domain name", RelaxPrivate)
	}
	return host, netip.Addr{}, nil
}

// checkResolved resolves name with r and reports whether every address
// is allowed.
func (p Policy) checkResolved(ctx context.Context, name string, r Resolver) error {
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", name)
	if err != nil || len(addrs) == 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return reject("host does not resolve")
	}
	for _, a := range addrs {
		if !p.AllowedAddr(a) {
			return rejectRelaxed("host resolves to an address that is not allowed", p.relaxFor(a))
		}
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// validName reports whether s is a host name of ASCII letters, digits,
// hyphens and underscores in dot-separated labels of 1 to 63 bytes, at most
// 253 bytes in all.
func validName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if len(label) == 0 || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// parseIPv4 parses s as an IPv4 address in the inet_aton forms: one to four
// dot-separated parts, each decimal, hexadecimal with a 0x prefix or octal
// with a leading 0, the last part filling the remaining bytes. s is in
// lower case.
func parseIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, part := range parts {
		n, ok := parseIPv4Part(part)
		if !ok {
			return netip.Addr{}, false
		}
		bits := 8
		if i == len(parts)-1 {
			bits = 8 * (4 - i)
		}
		if n >= 1<<bits {
			return netip.Addr{}, false
		}
		v = v<<bits | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Part parses one part of an inet_aton address.
func parseIPv4Part(s string) (uint64, bool) {
	base := 10
	switch {
	case len(s) > 2 && s[:2] == "0x":
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	// strconv takes no sign or underscore with an explicit base.
	n, err := strconv.ParseUint(s, base, 32)
	return n, err == nil
}
