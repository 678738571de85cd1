package ssrf

import (
	"net/netip"
	"strings"
)

// This file is an independent statement of what screening must never admit, written
// from spec §8.2 rather than from addr.go, for the fuzz targets to check
// the package against: contractBlocked is the spec's list of ranges, and inetAton
// reads IPv4 text as the C library does, so that no spelling a resolver or dialer might
// take as an address slips past the screen.

// refRange is one range of spec §8.2; private ones are admitted with
// AllowPrivateTargets.
type refRange struct {
	prefix  netip.Prefix
	private bool
}

func refRanges(private bool, ss ...string) []refRange {
	out := make([]refRange, len(ss))
	for i, s := range ss {
		out[i] = refRange{netip.MustParsePrefix(s), private}
	}
	return out
}

var (
	contractRanges = append(append(
		refRanges(true,
			"127.0.0.0/8", "::1/128", // loopback
			"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", // private
			"fc00::/7", // unique-local (AWS's IPv6 metadata fd00:ec2::254 is in it)
		),
		refRanges(false,
			"0.0.0.0/8", "::/128", // unspecified, "this network"
			"169.254.0.0/16", "fe80::/10", // link-local: cloud metadata 169.254.169.254
			"100.64.0.0/10",           // CGNAT (Alibaba's metadata 100.100.100.200)
			"224.0.0.0/4", "ff00::/8", // multicast
			"240.0.0.0/4",                  // reserved, with broadcast 255.255.255.255
			"192.0.0.0/24",                 // IETF reserved (Oracle's metadata 192.0.0.192)
			"168.63.129.16/32",             // Azure's platform address (WireServer, beside the metadata service)
			"198.18.0.0/15", "2001:2::/48", // benchmarking
			"fec0::/10", "100::/64", // deprecated site-local, discard
		)...),
		refRange{netip.MustParsePrefix("64:ff9b:1::/48"), false}, // local-use NAT64: any embedding
	)
	// Outside 2000::/3 IPv6 is reserved, except the prefixes above and the embeddings below.
	refGlobal6 = netip.MustParsePrefix("2000::/3")
	refMapped  = netip.MustParsePrefix("::ffff:0:0/96")
	refCompat  = netip.MustParsePrefix("::/96")
	refNAT64   = netip.MustParsePrefix("64:ff9b::/96")
	ref6to4    = netip.MustParsePrefix("2002::/16")
	refTeredo  = netip.MustParsePrefix("2001::/32")
)

// contractBlocked reports whether spec §8.2 forbids a connection to a (with
// allow_private_targets as given). An IPv6 address that carries IPv4 addresses (mapped,
// compatible, NAT64, 6to4, Teredo's server and client) is forbidden if any of them is.
func contractBlocked(a netip.Addr, allowPrivate bool) bool {
	if !a.IsValid() || a.Zone() != "" {
		return true
	}
	if refMapped.Contains(a) {
		a = a.Unmap()
	}
	for _, r := range contractRanges {
		if r.prefix.Contains(a) {
			return !(r.private && allowPrivate)
		}
	}
	if a.Is4() {
		return false
	}
	b := a.As16()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte(b[i : i+4])) }
	var carried []netip.Addr
	switch {
	case refCompat.Contains(a), refNAT64.Contains(a):
		carried = append(carried, v4(12))
	case ref6to4.Contains(a):
		carried = append(carried, v4(2))
	case refTeredo.Contains(a):
		client := [4]byte(b[12:16])
		for i := range client {
			client[i] ^= 0xff
		}
		carried = append(carried, v4(4), netip.AddrFrom4(client))
	}
	for _, c := range carried {
		if contractBlocked(c, allowPrivate) {
			return true
		}
	}
	return !refGlobal6.Contains(a) && !refNAT64.Contains(a) && !refCompat.Contains(a)
}

// inetAton parses s as the C library's inet_aton does: one to four dot-separated parts,
// each starting with a digit, decimal, octal after a leading 0, hexadecimal after 0x or
// 0X (with no digits at all, "0x" is 0); the last part fills the bytes left.
func inetAton(s string) (netip.Addr, bool) {
	var parts []uint64
	for {
		if s == "" || s[0] < '0' || s[0] > '9' {
			return netip.Addr{}, false
		}
		base, i := uint64(10), 0
		if s[0] == '0' {
			base, i = 8, 1
			if len(s) > 1 && (s[1] == 'x' || s[1] == 'X') {
				base, i = 16, 2
			}
		}
		var v uint64
		for ; i < len(s); i++ {
			c := s[i]
			if 'A' <= c && c <= 'F' {
				c += 'a' - 'A'
			}
			d := strings.IndexByte("0123456789abcdef", c)
			if d < 0 || uint64(d) >= base {
				break
			}
			if v = v*base + uint64(d); v > 0xffffffff {
				return netip.Addr{}, false
			}
		}
		parts = append(parts, v)
		if s = s[i:]; s == "" {
			break
		}
		if s[0] != '.' || len(parts) == 4 {
			return netip.Addr{}, false
		}
		s = s[1:]
	}
	last := len(parts) - 1
	var v uint64
	for i, p := range parts[:last] {
		if p > 0xff {
			return netip.Addr{}, false
		}
		v |= p << (24 - 8*i)
	}
	if parts[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	v |= parts[last]
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}
