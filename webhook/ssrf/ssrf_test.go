package ssrf

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// fakeResolver maps host names to addresses; a name it lacks does not resolve.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	ss, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	addrs := make([]netip.Addr, len(ss))
	for i, s := range ss {
		addrs[i] = netip.MustParseAddr(s)
	}
	return addrs, nil
}

var resolver = fakeResolver{
	"example.com":               {"93.184.215.14"},
	"hooks.example.org":         {"93.184.215.15", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
	"xn--bcher-kva.example":     {"93.184.215.16"},
	"under_score.example.net":   {"93.184.215.17"},
	"loopback.example":          {"127.0.0.1"},
	"private10.example":         {"10.1.2.3"},
	"private192.example":        {"192.168.1.20"},
	"metadata.example":          {"169.254.169.254"},
	"v6loopback.example":        {"::1"},
	"mixed.example":             {"93.184.215.14", "192.168.1.1"},
	"mixed6.example":            {"2606:4700:4700::1111", "fe80::1"},
	"mapped.example":            {"::ffff:10.0.0.1"},
	"ec2v6.example":             {"fd00:ec2::254"},
	"cgnat.example":             {"100.64.1.1"},
	"empty.example":             {},
	"intranet":                  {"10.0.0.7"},
	"localhost":                 {"127.0.0.1"},
	"metadata.google.internal":  {"169.254.169.254"},
	"api.internal":              {"93.184.215.14"},
	"printer.local":             {"93.184.215.14"},
	"foo.localhost":             {"93.184.215.14"},
	"public.example.localhost":  {"93.184.215.14"},
	"nat64-private.example.com": {"64:ff9b::a00:1"},
}

func TestCheckURLRejects(t *testing.T) {
	long := "https://example.com/" + strings.Repeat("a", MaxURLLength-len("https://example.com/")+1)
	for _, raw := range []string{
		// Scheme, userinfo, length, structure.
		"http://example.com/hook",
		"ftp://example.com/",
		"file:///etc/passwd",
		"gopher://example.com/",
		"javascript:alert(1)",
		"ws://example.com/",
		"example.com/hook",
		"//example.com/hook",
		"",
		"https:example.com",
		"https:///hook",
		"https://user:pass@example.com/",
		"https://user@example.com/",
		"https://127.0.0.1:443@example.com/",
		`https://example.com\@127.0.0.1/`,
		long,
		"https://example.com:0/",
		"https://example.com:99999/",

		// Local names, in any case, with a trailing dot.
		"https://localhost/",
		"https://LocalHost/",
		"https://localhost./",
		"https://localhost:8443/",
		"https://foo.localhost/",
		"https://public.example.localhost/",
		"https://printer.local/",
		"https://metadata.google.internal/computeMetadata/v1/",
		"https://METADATA.GOOGLE.INTERNAL./",
		"https://api.internal:8443/",

		// Invalid names.
		"https://bücher.example/",
		"https://b%C3%BCcher.example/",
		"https://example..com/",
		"https://example.com../",
		"https://a%25b.example/",
		"https://" + strings.Repeat("a", 64) + ".example/",
		"https://intranet/",

		// Names resolving to blocked addresses, or to nothing.
		"https://loopback.example/",
		"https://private10.example/",
		"https://private192.example/",
		"https://metadata.example/latest/meta-data/",
		"https://v6loopback.example/",
		"https://mixed.example/",
		"https://mixed6.example/",
		"https://mapped.example/",
		"https://ec2v6.example/",
		"https://cgnat.example/",
		"https://nat64-private.example.com/",
		"https://nxdomain.example/",
		"https://empty.example/",

		// IPv4 loopback in every spelling.
		"https://127.0.0.1/",
		"HTTPS://127.0.0.1/",
		"https://127.0.0.1./",
		"https://127.0.0.1:8443/",
		"https://127.255.255.254/",
		"https://2130706433/",
		"https://0177.0.0.1/",
		"https://0x7f000001/",
		"https://0X7F000001/",
		"https://0x7f000001./",
		"https://0x7F.0.0.1/",
		"https://127.1/",
		"https://127.0.1/",
		"https://0x7f.1/",
		"https://0177.0x0.1/",
		"https://017700000001/",
		"https://00000177.0.0.1/",
		"https://%31%32%37.0.0.1/",
		"https://127.0.0.%31/",

		// Other blocked IPv4 ranges.
		"https://0.0.0.0/",
		"https://0/",
		"https://0.1.2.3/",
		"https://10.0.0.1/",
		"https://10.1/",
		"https://167772161/",
		"https://172.16.5.4/",
		"https://172.31.255.255/",
		"https://192.168.0.1/",
		"https://0xc0.0xa8.0.1/",
		"https://169.254.169.254/latest/meta-data/",
		"https://2852039166/",
		"https://0xa9fea9fe/",
		"https://0251.0376.0251.0376/",
		"https://169.254.43518/",
		"https://100.64.0.1/",
		"https://100.127.255.255/",
		"https://224.0.0.1/",
		"https://239.255.255.250/",
		"https://255.255.255.255/",
		"https://4294967295/",
		"https://240.0.0.1/",
		"https://192.0.0.8/",
		"https://192.0.2.1/",
		"https://192.88.99.1/",
		"https://198.51.100.7/",
		"https://203.0.113.9/",
		"https://198.18.0.1/",
		"https://198.19.255.255/",

		// Hosts that look numeric but are no IPv4 address.
		"https://999.1.1.1/",
		"https://0x1g/",
		"https://1.2.3.4.5/",
		"https://08.0.0.1/",
		"https://1.256.1.1/",
		"https://1.2.65536/",
		"https://4294967296/",
		"https://0x100000000/",
		"https://1..1/",
		"https://0x/",
		"https://0x.0x.0x.0x/",
		"https://1_0.0.0.1/",
		"https://evil.127/",
		"https://example.1com/",

		// IPv6.
		"https://[::1]/",
		"https://[::1]:8443/",
		"https://[0:0:0:0:0:0:0:1]/",
		"https://[::]/",
		"https://[::ffff:127.0.0.1]/",
		"https://[::ffff:7f00:1]/",
		"https://[0:0:0:0:0:ffff:127.0.0.1]/",
		"https://[::ffff:169.254.169.254]/",
		"https://[::ffff:a9fe:a9fe]/",
		"https://[::ffff:10.0.0.1]/",
		"https://[::127.0.0.1]/",
		"https://[::1.1.1.1]/",
		"https://[64:ff9b::127.0.0.1]/",
		"https://[64:ff9b::a9fe:a9fe]/",
		"https://[64:ff9b::10.0.0.1]/",
		"https://[64:ff9b:1::10.0.0.1]/",
		"https://[64:ff9b:1::1.1.1.1]/",
		"https://[2002:7f00:1::]/",
		"https://[2002:a9fe:a9fe::1]/",
		"https://[2002:c0a8:101::1]/",
		"https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
		"https://[2001:2::1]/",
		"https://[2001:db8::1]/",
		"https://[3fff::1]/",
		"https://[fe80::1]/",
		"https://[FE80::1]/",
		"https://[fe80::1%25eth0]/",
		"https://[fe80::1%eth0]/",
		"https://[2606:4700:4700::1111%25eth0]/",
		"https://[fc00::1]/",
		"https://[fd00:ec2::254]/",
		"https://[ff02::1]/",
		"https://[ff05::1:3]/",
		"https://[100::1]/",
		"https://[fec0::1]/",
		"https://[1.2.3.4]/",
		"https://[::1/",
		"https://::1/",
	} {
		u, err := Policy{}.CheckURL(context.Background(), raw, resolver)
		if err == nil {
			t.Errorf("CheckURL(%q) = %v, want rejection", raw, u)
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Reason == "" {
			t.Errorf("CheckURL(%q) error %v is not an *Error with a reason", raw, err)
		}
	}
}

func TestCheckURLAdmits(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{"https://example.com/hook", "https://example.com/hook"},
		{"https://1.1.1.1/x", "https://1.1.1.1/x"},
		{"https://[2606:4700:4700::1111]/x", "https://[2606:4700:4700::1111]/x"},
		{"https://hooks.example.org:8443/a?b=c", "https://hooks.example.org:8443/a?b=c"},
		{"HTTPS://Example.COM./hook", "https://example.com/hook"},
		{"https://example.com:443/hook#frag", "https://example.com:443/hook#frag"},
		{"https://example.com:08443/", "https://example.com:8443/"},
		{"https://xn--bcher-kva.example/", "https://xn--bcher-kva.example/"},
		{"https://under_score.example.net/", "https://under_score.example.net/"},
		{"https://16843009/x", "https://1.1.1.1/x"},
		{"https://0x08.0x08.0x08.0x08/", "https://8.8.8.8/"},
		{"https://010.010.010.010/", "https://8.8.8.8/"},
		{"https://1.1/", "https://1.0.0.1/"},
		{"https://172.32.0.1/", "https://172.32.0.1/"},
		{"https://100.128.0.1/", "https://100.128.0.1/"},
		{"https://[2606:4700:4700:0:0:0:0:1111]:8443/", "https://[2606:4700:4700::1111]:8443/"},
		{"https://[::ffff:8.8.8.8]/", "https://[::ffff:8.8.8.8]/"},
		{"https://[64:ff9b::8.8.8.8]/", "https://[64:ff9b::808:808]/"},
		{"https://[2002:808:808::1]/", "https://[2002:808:808::1]/"},
	} {
		u, err := Policy{}.CheckURL(context.Background(), tt.raw, resolver)
		if err != nil {
			t.Errorf("CheckURL(%q): %v", tt.raw, err)
			continue
		}
		if got := u.String(); got != tt.want {
			t.Errorf("CheckURL(%q) = %q, want %q", tt.raw, got, tt.want)
		}
	}
}

func TestCheckURLPolicies(t *testing.T) {
	private := Policy{AllowPrivateTargets: true}
	httpOK := Policy{AllowHTTP: true}
	both := Policy{AllowHTTP: true, AllowPrivateTargets: true}
	for _, tt := range []struct {
		p   Policy
		raw string
		ok  bool
	}{
		{private, "https://127.0.0.1/", true},
		{private, "https://127.1:8080/", true},
		{private, "https://10.0.0.1/", true},
		{private, "https://172.16.0.1/", true},
		{private, "https://192.168.1.1/", true},
		{private, "https://[::1]/", true},
		{private, "https://[::ffff:127.0.0.1]/", true},
		{private, "https://[fd00::1]/", true},
		{private, "https://loopback.example/", true},
		{private, "https://mixed.example/", true},
		{private, "https://intranet/", true},
		{private, "https://169.254.169.254/", false},
		{private, "https://0xa9fea9fe/", false},
		{private, "https://[fe80::1]/", false},
		{private, "https://[::ffff:169.254.169.254]/", false},
		{private, "https://[64:ff9b::a9fe:a9fe]/", false},
		{private, "https://[64:ff9b::a00:1]/", false},
		{private, "https://metadata.example/", false},
		{private, "https://mixed6.example/", false},
		{private, "https://0.0.0.0/", false},
		{private, "https://[::]/", false},
		{private, "https://100.64.0.1/", false},
		{private, "https://localhost/", false},
		{private, "https://metadata.google.internal/", false},
		{private, "https://nxdomain.example/", false},
		{private, "http://127.0.0.1/", false},
		{httpOK, "http://example.com/hook", true},
		{httpOK, "HTTP://example.com/hook", true},
		{httpOK, "https://example.com/hook", true},
		{httpOK, "http://127.0.0.1/", false},
		{httpOK, "ftp://example.com/", false},
		{httpOK, "http://user@example.com/", false},
		{both, "http://127.0.0.1:8080/hook", true},
		{both, "http://169.254.169.254/", false},
	} {
		_, err := tt.p.CheckURL(context.Background(), tt.raw, resolver)
		if (err == nil) != tt.ok {
			t.Errorf("%+v.CheckURL(%q) error = %v, want ok %v", tt.p, tt.raw, err, tt.ok)
		}
	}
}

func TestCheckURLContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Policy{}.CheckURL(ctx, "https://nxdomain.example/", resolver)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CheckURL with a canceled context: %v, want context.Canceled", err)
	}
}

func TestAllowedAddr(t *testing.T) {
	for _, tt := range []struct {
		addr          string
		prod, private bool
	}{
		{"1.1.1.1", true, true},
		{"93.184.215.14", true, true},
		{"2606:4700:4700::1111", true, true},
		{"::ffff:1.1.1.1", true, true},
		{"64:ff9b::1.1.1.1", true, true},
		{"2002:101:101::", true, true},
		{"127.0.0.1", false, true},
		{"10.255.255.255", false, true},
		{"172.16.0.0", false, true},
		{"172.15.255.255", true, true},
		{"172.32.0.0", true, true},
		{"192.168.255.255", false, true},
		{"::1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"fc00::1", false, true},
		{"fd00:ec2::254", false, true},
		{"169.254.169.254", false, false},
		{"169.254.0.1", false, false},
		{"::ffff:169.254.169.254", false, false},
		{"168.63.129.16", false, false},
		{"64:ff9b::a83f:8110", false, false},
		{"168.63.129.15", true, true},
		{"168.63.129.17", true, true},
		{"fe80::1", false, false},
		{"febf::1", false, false},
		{"fe80::1%eth0", false, false},
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"100.64.0.0", false, false},
		{"100.63.255.255", true, true},
		{"224.0.0.1", false, false},
		{"ff02::1", false, false},
		{"255.255.255.255", false, false},
		{"240.0.0.1", false, false},
		{"192.0.0.170", false, false},
		{"192.0.2.1", false, false},
		{"198.51.100.1", false, false},
		{"203.0.113.1", false, false},
		{"198.18.0.1", false, false},
		{"198.20.0.1", true, true},
		{"2001:db8::1", false, false},
		{"2001:2::1", false, false},
		{"2001::1", false, false},
		{"100::1", false, false},
		{"::127.0.0.1", false, false},
		{"64:ff9b::127.0.0.1", false, false},
		{"64:ff9b::10.0.0.1", false, false},
		{"64:ff9b:1::1.1.1.1", false, false},
		{"2002:7f00:1::", false, false},
		{"2002:a00:1::", false, false},
		{"3fff::1", false, false},
		{"4000::1", false, false},
	} {
		a := netip.MustParseAddr(tt.addr)
		if got := (Policy{}).AllowedAddr(a); got != tt.prod {
			t.Errorf("Policy{}.AllowedAddr(%s) = %v, want %v", a, got, tt.prod)
		}
		if got := (Policy{AllowPrivateTargets: true}).AllowedAddr(a); got != tt.private {
			t.Errorf("Policy{AllowPrivateTargets: true}.AllowedAddr(%s) = %v, want %v", a, got, tt.private)
		}
	}
	if (Policy{AllowPrivateTargets: true}).AllowedAddr(netip.Addr{}) {
		t.Error("the zero Addr is allowed")
	}
}

func TestParseIPv4(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0x7f.0.0x1", "127.0.0.1"},
		{"10.1", "10.0.0.1"},
		{"192.168.257", "192.168.1.1"},
		{"0", "0.0.0.0"},
		{"00", "0.0.0.0"},
		{"0x0", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"0xffffffff", "255.255.255.255"},
		{"1.2.3.4.5", ""},
		{"256.0.0.1", ""},
		{"1.2.3.256", ""},
		{"1.16777216", ""},
		{"4294967296", ""},
		{"08", ""},
		{"0x", ""},
		{"0xg", ""},
		{"1..2", ""},
		{"", ""},
		{"+1", ""},
		{"-1", ""},
		{"1_0", ""},
		{"0x0x1", ""},
	} {
		a, ok := parseIPv4(tt.in)
		switch {
		case tt.want == "" && ok:
			t.Errorf("parseIPv4(%q) = %v, want failure", tt.in, a)
		case tt.want != "" && (!ok || a.String() != tt.want):
			t.Errorf("parseIPv4(%q) = %v, %v; want %s", tt.in, a, ok, tt.want)
		}
	}
}
