package ssrf

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// fuzzResolver answers every name with the addresses the fuzzer wrote in answers (see
// addrsFrom); with no answers it is the table resolver of ssrf_test.go. It records the
// names it was asked and what it returned.
type fuzzResolver struct {
	answers  []byte
	asked    []string
	returned []netip.Addr
}

func (r *fuzzResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.asked = append(r.asked, host)
	if len(r.answers) == 0 {
		addrs, err := resolver.LookupNetIP(ctx, network, host)
		r.returned = append(r.returned, addrs...)
		return addrs, err
	}
	addrs := addrsFrom(r.answers)
	r.returned = append(r.returned, addrs...)
	return addrs, nil
}

// addrsFrom reads addresses from fuzz bytes: a tag byte, then 4 bytes of IPv4 (tag%4 ==
// 0), 16 of IPv6 (1), 4 of IPv4 as IPv4-mapped IPv6 (2), or 16 of IPv6 with zone "eth0"
// (3); a short tail is ignored.
func addrsFrom(b []byte) []netip.Addr {
	var out []netip.Addr
	for len(b) > 0 {
		tag, n := b[0]%4, 4
		if tag == 1 || tag == 3 {
			n = 16
		}
		if len(b) < 1+n {
			break
		}
		v := b[1 : 1+n]
		b = b[1+n:]
		switch tag {
		case 0:
			out = append(out, netip.AddrFrom4([4]byte(v)))
		case 1:
			out = append(out, netip.AddrFrom16([16]byte(v)))
		case 2:
			out = append(out, netip.AddrFrom16([16]byte(append(make([]byte, 10, 16), 0xff, 0xff, v[0], v[1], v[2], v[3]))))
		case 3:
			out = append(out, netip.AddrFrom16([16]byte(v)).WithZone("eth0"))
		}
	}
	return out
}

// spellings returns every address host can be read as: by net/netip, by net.ParseIP and
// by the C library's inet_aton, as written, in lower case and without a trailing dot.
func spellings(host string) []netip.Addr {
	var out []netip.Addr
	for _, h := range []string{host, strings.ToLower(host), strings.TrimSuffix(strings.ToLower(host), ".")} {
		if a, err := netip.ParseAddr(h); err == nil {
			out = append(out, a)
		}
		if ip := net.ParseIP(h); ip != nil {
			a, _ := netip.AddrFromSlice(ip)
			out = append(out, a)
		}
		if a, ok := inetAton(h); ok {
			out = append(out, a)
		}
	}
	return out
}

// FuzzCheckURL checks what CheckURL admits, with the resolver's answers under the
// fuzzer's control:
//
//   - a rejection is an *Error;
//   - an admitted URL has an allowed scheme, no userinfo, at most MaxURLLength bytes;
//   - every address the resolver returned is allowed by AllowedAddr and by the spec's
//     own list (contractBlocked); an IP literal is never looked up, a name is looked up
//     once, in its canonical form;
//   - the host, as written and as returned, read by netip, net.ParseIP or inet_aton in
//     any case, with or without a trailing dot, is never a blocked address, and an IP
//     literal is returned in the standard spelling of the address every parser read;
//   - the canonical URL parses back to the same URL and passes again unchanged;
//   - what the production policy admits, the relaxed policies admit unchanged.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/hook",
		"https://hooks.example.org:8443/a?b=c",
		"https://1.1.1.1/x",
		"https://[2606:4700:4700::1111]/x",
		"https://16843009/",
		"https://0x7f.1/",
		"https://0177.0.0.1/",
		"https://2130706433/",
		"https://%31%32%37.0.0.1/",
		"https://[::ffff:127.0.0.1]/",
		"https://[64:ff9b::a9fe:a9fe]/",
		"https://[2002:7f00:1::]/",
		"https://[fe80::1%25eth0]/",
		"https://localhost./",
		"https://metadata.google.internal/",
		"https://user:pass@example.com/",
		"https://mixed.example/",
		"https://a.b.c.example/",
		"https://999.1.1.1/",
		"http://example.com/",
		"HTTPS://EXAMPLE.COM./",
		"https://8.8.8.8./",
		"https://0x08.0x08.0x0808/",
		"https://0x.0x.0x.0x/",
		"https://intranet/",
	} {
		f.Add(s, false, false, []byte(nil))
		f.Add(s, true, true, []byte(nil))
	}
	public4 := []byte{0, 93, 184, 215, 14}
	metadata := []byte{0, 169, 254, 169, 254}
	mappedPrivate := []byte{2, 10, 0, 0, 1}
	f.Add("https://rebind.example/", false, false, public4)
	f.Add("https://rebind.example/", false, false, append(append([]byte{}, public4...), metadata...))
	f.Add("https://rebind.example/", false, true, mappedPrivate)
	f.Add("https://rebind.example/", false, true, append([]byte{3}, netip.MustParseAddr("2606:4700::1").AsSlice()...))
	f.Add("https://rebind.example/", false, false, append([]byte{1}, netip.MustParseAddr("2002:a9fe:a9fe::1").AsSlice()...))
	f.Fuzz(func(t *testing.T, raw string, allowHTTP, allowPrivate bool, answers []byte) {
		p := Policy{AllowHTTP: allowHTTP, AllowPrivateTargets: allowPrivate}
		r := &fuzzResolver{answers: answers}
		u, err := p.CheckURL(context.Background(), raw, r)
		if err != nil {
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Fatalf("CheckURL(%q) error %v is not an *Error", raw, err)
			}
			return
		}
		canon := u.String()
		switch {
		case u.Scheme != "https" && !(u.Scheme == "http" && allowHTTP):
			t.Fatalf("CheckURL(%q) admitted scheme %q", raw, u.Scheme)
		case u.User != nil:
			t.Fatalf("CheckURL(%q) admitted userinfo", raw)
		case len(canon) > MaxURLLength:
			t.Fatalf("CheckURL(%q) returned a URL of %d bytes", raw, len(canon))
		}
		for _, a := range r.returned {
			if !p.AllowedAddr(a) || contractBlocked(a, allowPrivate) {
				t.Fatalf("CheckURL(%q) admitted a name resolving to %v", raw, a)
			}
		}

		host := u.Hostname()
		literal, isLiteral := netip.ParseAddr(host)
		if isLiteral == nil {
			if len(r.asked) > 0 {
				t.Fatalf("CheckURL(%q) looked up %q for IP literal %s", raw, r.asked, host)
			}
			if literal.String() != host || !p.AllowedAddr(literal) {
				t.Fatalf("CheckURL(%q) returned host %q", raw, host)
			}
		} else if len(r.asked) != 1 || r.asked[0] != host {
			t.Fatalf("CheckURL(%q) returned name %q but looked up %q", raw, host, r.asked)
		}
		orig, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("CheckURL(%q) admitted a URL url.Parse rejects: %v", raw, err)
		}
		for _, h := range []string{orig.Hostname(), host} {
			for _, a := range spellings(h) {
				if contractBlocked(a, allowPrivate) {
					t.Fatalf("CheckURL(%q) admitted host %q, which reads as %v", raw, h, a)
				}
				if isLiteral != nil || a.Unmap() != literal.Unmap() {
					t.Fatalf("CheckURL(%q) returned %q, but host %q also reads as %v", raw, host, h, a)
				}
			}
		}

		if back, err := url.Parse(canon); err != nil || back.String() != canon || back.Host != u.Host {
			t.Fatalf("CheckURL(%q) = %q, which parses back as %v, %v", raw, canon, back, err)
		}
		again, err := p.CheckURL(context.Background(), canon, &fuzzResolver{answers: answers})
		if err != nil || again.String() != canon {
			t.Fatalf("CheckURL(%q) = %q, rechecked as %v, %v", raw, canon, again, err)
		}
		if !allowHTTP && !allowPrivate {
			for _, relaxed := range []Policy{{AllowHTTP: true}, {AllowPrivateTargets: true}, {AllowHTTP: true, AllowPrivateTargets: true}} {
				v, err := relaxed.CheckURL(context.Background(), raw, &fuzzResolver{answers: answers})
				if err != nil || v.String() != canon {
					t.Fatalf("CheckURL(%q) = %q, but under %+v: %v, %v", raw, canon, relaxed, v, err)
				}
			}
		}
	})
}

// FuzzAllowedAddr checks the address rule, at screening and at connect time: an address
// AllowedAddr admits is in none of spec §8.2's blocked ranges, whatever it carries;
// Control admits exactly the TCP connections to addresses AllowedAddr admits, and an
// address string Control admits is one whose host no parser reads as a blocked address.
func FuzzAllowedAddr(f *testing.F) {
	for _, s := range []string{
		"93.184.215.14", "127.0.0.1", "10.1.2.3", "169.254.169.254", "100.100.100.200",
		"192.0.0.192", "168.63.129.16", "255.255.255.255", "0.0.0.0", "198.18.0.1", "224.0.0.1",
		"2606:4700:4700::1111", "::1", "::", "fe80::1", "fd00:ec2::254", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:8.8.8.8", "::127.0.0.1", "::ffff:0:127.0.0.1",
		"64:ff9b::a9fe:a9fe", "64:ff9b::808:808", "64:ff9b:1::a00:1", "2002:a00:1::", "2002:808:808::",
		"2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:2::1", "2001:db8::1", "fec0::1", "100::1",
	} {
		a := netip.MustParseAddr(s)
		f.Add(a.AsSlice(), "", uint16(443), "tcp", "", false)
		f.Add(a.AsSlice(), "", uint16(443), "tcp6", "", true)
	}
	f.Add([]byte{127, 0, 0, 1}, "", uint16(80), "udp", "", true)
	f.Add(netip.MustParseAddr("fe80::1").AsSlice(), "eth0", uint16(80), "tcp", "", true)
	for _, s := range []string{"127.1:80", "0x7f.1:80", "[::1]:80", "localhost:80", "93.184.215.14:0", "93.184.215.14", ":80", "[fe80::1%eth0]:80"} {
		f.Add([]byte{8, 8, 8, 8}, "", uint16(53), "tcp", s, false)
	}
	f.Fuzz(func(t *testing.T, ip []byte, zone string, port uint16, network, address string, allowPrivate bool) {
		p := Policy{AllowPrivateTargets: allowPrivate}
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		if a.Is6() {
			a = a.WithZone(zone)
		}
		allowed := p.AllowedAddr(a)
		if allowed && contractBlocked(a, allowPrivate) {
			t.Fatalf("AllowedAddr(%v) under %+v, a blocked address", a, p)
		}
		if a.Is4In6() && a.Zone() == "" && p.AllowedAddr(a.Unmap()) != allowed {
			t.Fatalf("AllowedAddr(%v) = %v, but the address it maps %v", a, allowed, a.Unmap())
		}
		tcp := network == "tcp" || network == "tcp4" || network == "tcp6"
		ap := netip.AddrPortFrom(a, port).String()
		if err := p.Control(network, ap, nil); (err == nil) != (tcp && allowed) {
			t.Fatalf("Control(%q, %q) = %v; AllowedAddr %v", network, ap, err, allowed)
		} else if err != nil {
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Fatalf("Control(%q, %q) error %v is not an *Error", network, ap, err)
			}
		}

		if p.Control("tcp", address, nil) != nil {
			return
		}
		parsed, err := netip.ParseAddrPort(address)
		if err != nil || !p.AllowedAddr(parsed.Addr()) {
			t.Fatalf("Control admitted %q: %v", address, err)
		}
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			t.Fatalf("Control admitted %q: %v", address, err)
		}
		for _, a := range append(spellings(host), parsed.Addr()) {
			if contractBlocked(a, allowPrivate) {
				t.Fatalf("Control admitted %q, whose host reads as %v", address, a)
			}
		}
	})
}

// TestReference checks the test's own reference against known addresses of spec §8.2's ranges.
func TestReference(t *testing.T) {
	for _, tt := range []struct {
		addr           string
		blocked, inPvt bool // blocked in production; blocked with allow_private_targets
	}{
		{"93.184.215.14", false, false},
		{"127.0.0.1", true, false},
		{"::ffff:10.0.0.1", true, false},
		{"169.254.169.254", true, true},
		{"fe80::1", true, true},
		{"fd00:ec2::254", true, false},
		{"100.100.100.200", true, true},
		{"64:ff9b::a9fe:a9fe", true, true},
		{"2002:7f00:1::", true, false},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", true, false}, // Teredo client 127.0.0.1
		{"2606:4700::1", false, false},
		{"255.255.255.255", true, true},
		{"168.63.129.16", true, true},
		{"::ffff:168.63.129.16", true, true},
	} {
		a := netip.MustParseAddr(tt.addr)
		if got := contractBlocked(a, false); got != tt.blocked {
			t.Errorf("contractBlocked(%v, false) = %v", a, got)
		}
		if got := contractBlocked(a, true); got != tt.inPvt {
			t.Errorf("contractBlocked(%v, true) = %v", a, got)
		}
	}
	for in, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", "127.1": "127.0.0.1", "0x7f.1": "127.0.0.1", "0177.0.0.1": "127.0.0.1",
		"2130706433": "127.0.0.1", "0X7F000001": "127.0.0.1", "0x": "0.0.0.0", "1.2.65535": "1.2.255.255",
		"08": "", "1.2.3.4.": "", "256.1": "", "1.16777216": "", "4294967296": "", "a.1": "", "": "", "1..1": "",
	} {
		a, ok := inetAton(in)
		if got := a.String(); !ok && want != "" || ok && got != want {
			t.Errorf("inetAton(%q) = %v, %v; want %q", in, a, ok, want)
		}
	}
}
