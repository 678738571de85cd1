package ssrf

import "net/netip"

// class is what an address is to screening.
type class int

const (
	public  class = iota // admitted
	private              // admitted only with AllowPrivateTargets
	blocked              // never admitted
)

var (
	// privatePrefixes are loopback, private and unique-local addresses.
	privatePrefixes = prefixes(
		"127.0.0.0/8",
		"10.0.0.0/8",
		"172.16.0.0/12",
		"192.168.0.0/16",
		"::1/128",
		"fc00::/7",
	)

	// blocked4 are the IPv4 addresses never admitted.
	blocked4 = prefixes(
		"0.0.0.0/8",        // unspecified, "this network"
		"169.254.0.0/16",   // link-local, cloud metadata
		"168.63.129.16/32", // Azure's platform address (WireServer), beside its metadata service
		"100.64.0.0/10",    // shared address space (CGNAT)
		"192.0.0.0/24",     // IETF protocol assignments
		"192.0.2.0/24",     // documentation (TEST-NET-1)
		"192.88.99.0/24",   // 6to4 relay anycast (deprecated)
		"198.18.0.0/15",    // benchmarking
		"198.51.100.0/24",  // documentation (TEST-NET-2)
		"203.0.113.0/24",   // documentation (TEST-NET-3)
		"224.0.0.0/4",      // multicast
		"240.0.0.0/4",      // reserved, broadcast
	)

	// globalUnicast6 is where public IPv6 addresses are; outside it only
	// the embeddings below and privatePrefixes can be admitted.
	globalUnicast6 = netip.MustParsePrefix("2000::/3")

	// blocked6 are the IPv6 addresses inside globalUnicast6 never admitted.
	blocked6 = prefixes(
		"2001::/23",     // IETF protocol assignments: Teredo, benchmarking, ORCHID...
		"2001:db8::/32", // documentation
		"3fff::/20",     // documentation
	)

	// Prefixes that embed an IPv4 address. The local-use NAT64 prefix
	// 64:ff9b:1::/48 is outside globalUnicast6, hence blocked whatever it
	// embeds: where its IPv4 address sits depends on the local network.
	nat64  = netip.MustParsePrefix("64:ff9b::/96") // IPv4 in the last 4 bytes
	sixTo4 = netip.MustParsePrefix("2002::/16")    // IPv4 in bytes 2 to 5
)

func prefixes(ss ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		ps[i] = netip.MustParsePrefix(s)
	}
	return ps
}

func inAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// AllowedAddr reports whether p admits a connection to a, by the address
// rule of the package documentation. IPv6 addresses carrying an IPv4
// address (IPv4-mapped, NAT64, 6to4) are judged by the IPv4 address. An
// invalid address, or one with a zone, is not allowed.
func (p Policy) AllowedAddr(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	switch classify(a.Unmap()) {
	case public:
		return true
	case private:
		return p.AllowPrivateTargets
	}
	return false
}

// classify reports the class of a, which is not IPv4-mapped.
func classify(a netip.Addr) class {
	if inAny(privatePrefixes, a) {
		return private
	}
	if a.Is4() {
		if inAny(blocked4, a) {
			return blocked
		}
		return public
	}

	b := a.As16()
	switch {
	case nat64.Contains(a):
		return embedded(netip.AddrFrom4([4]byte(b[12:16])))
	case sixTo4.Contains(a):
		return embedded(netip.AddrFrom4([4]byte(b[2:6])))
	case !globalUnicast6.Contains(a), inAny(blocked6, a):
		return blocked
	}
	return public
}

// embedded reports the class of an address holding the IPv4 address v4:
// only public addresses may be embedded.
func embedded(v4 netip.Addr) class {
	if classify(v4) == public {
		return public
	}
	return blocked
}
