package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestTrustedProxies: http.trusted_proxies takes CIDRs and single addresses, from a file or
// the environment, and none by default.
func TestTrustedProxies(t *testing.T) {
	if got := mustLoad(t, nil).HTTP.Proxies(); len(got) != 0 {
		t.Fatalf("default trusted proxies %v, want none", got)
	}
	c := mustLoad(t, nil, "http: {trusted_proxies: ['10.0.0.0/8', '192.0.2.7', 'fd00::/8']}\n")
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("fd00::/8")}
	if got := c.HTTP.Proxies(); !slices.Equal(got, want) {
		t.Fatalf("Proxies() = %v, want %v", got, want)
	}
	c = mustLoad(t, []string{"LEASH_HTTP_TRUSTED_PROXIES=127.0.0.1/32,::1"})
	if got := c.HTTP.Proxies(); len(got) != 2 || got[1] != netip.MustParsePrefix("::1/128") {
		t.Fatalf("from the environment: %v", got)
	}
}

// A trusted proxy that is not a CIDR or an address stops start-up, naming the entry.
func TestBadTrustedProxies(t *testing.T) {
	for _, tc := range []struct {
		files, env []string
		want       string
	}{
		{[]string{"http: {trusted_proxies: ['10.0.0.0/8', '10.0.0.0/33']}\n"}, nil, "http.trusted_proxies[1]: \"10.0.0.0/33\" is not a CIDR"},
		{nil, []string{"LEASH_HTTP_TRUSTED_PROXIES=ingress.local"}, "http.trusted_proxies[0] (environment variable LEASH_HTTP_TRUSTED_PROXIES): \"ingress.local\" is not a CIDR"},
		{[]string{"http: {trusted_proxies: ['fe80::1%eth0']}\n"}, nil, "http.trusted_proxies[0]"},
	} {
		_, err := Load(writeFiles(t, tc.files...), tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: error %v, want %q", tc.files, tc.env, err, tc.want)
		}
	}
}
