package ssrf

import (
	"context"
	"hash/fnv"
	"net/netip"
	"testing"
)

// hashResolver resolves the names of the fake resolver as it does, and any
// other name to two addresses picked by a hash of the name from a pool of
// public and blocked ones. It records what it returned.
type hashResolver struct{ returned []netip.Addr }

var pool = []netip.Addr{
	netip.MustParseAddr("93.184.215.14"),
	netip.MustParseAddr("2606:4700:4700::1111"),
	netip.MustParseAddr("127.0.0.1"),
	netip.MustParseAddr("10.0.0.1"),
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("::1"),
	netip.MustParseAddr("::ffff:192.168.0.1"),
	netip.MustParseAddr("fe80::1"),
}

func (r *hashResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if _, ok := resolver[host]; ok {
		addrs, err := resolver.LookupNetIP(ctx, network, host)
		r.returned = append(r.returned, addrs...)
		return addrs, err
	}
	h := fnv.New32a()
	h.Write([]byte(host))
	n := h.Sum32()
	addrs := []netip.Addr{pool[n%uint32(len(pool))], pool[(n>>8)%uint32(len(pool))]}
	r.returned = append(r.returned, addrs...)
	return addrs, nil
}

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
	} {
		f.Add(s, false, false)
		f.Add(s, true, true)
	}
	f.Fuzz(func(t *testing.T, raw string, allowHTTP, allowPrivate bool) {
		p := Policy{AllowHTTP: allowHTTP, AllowPrivateTargets: allowPrivate}
		r := &hashResolver{}
		u, err := p.CheckURL(context.Background(), raw, r)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("CheckURL(%q) error %v is not an *Error", raw, err)
			}
			return
		}
		for _, a := range r.returned {
			if !p.AllowedAddr(a) {
				t.Fatalf("CheckURL(%q) admitted a name resolving to %v", raw, a)
			}
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && !p.AllowedAddr(a) {
			t.Fatalf("CheckURL(%q) admitted address %v", raw, a)
		}
		if len(u.String()) > MaxURLLength {
			t.Fatalf("CheckURL(%q) returned a URL over %d bytes", raw, MaxURLLength)
		}
		// The canonical URL passes again, unchanged.
		again, err := p.CheckURL(context.Background(), u.String(), &hashResolver{})
		if err != nil {
			t.Fatalf("CheckURL(%q) = %q, which is rejected: %v", raw, u, err)
		}
		if again.String() != u.String() {
			t.Fatalf("CheckURL(%q) = %q, rechecked as %q", raw, u, again)
		}
	})
}
