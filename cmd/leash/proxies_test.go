package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/leashd/leash/testkit/leashproc"
)

// clientFrom returns an HTTP client whose connections come from the loopback address
// local (on Linux every 127.0.0.0/8 address is the loopback's).
func clientFrom(t *testing.T, local string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// limitThrough sends POST /v1/limit with key through c to base and returns the status.
func limitThrough(t *testing.T, c *http.Client, base, key string) int {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/limit", strings.NewReader(`{"namespace":"n","key":"k","limit":1000000,"window_ms":60000}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestTrustedProxies runs a real reverse proxy (it appends the client's address to
// X-Forwarded-For) in front of a real `leash serve`: with http.trusted_proxies naming the
// proxy, an attacker sending wrong keys through it is slowed while a valid client through
// the same proxy gets only 200s, and the refusal log names the attacker's address; without
// the setting, the forwarded header changes nothing and both share the proxy's address
// (spec §15.7).
func TestTrustedProxies(t *testing.T) {
	run := func(t *testing.T, env ...string) (attacker, valid map[int]int, p *leashproc.Proc) {
		p = leashproc.Start(t, binary, nil, append([]string{"LEASH_DEV_API_KEY=dev-key"}, env...)...)
		target, _ := url.Parse(p.URL)
		proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
		t.Cleanup(proxy.Close)
		bad, good := clientFrom(t, "127.0.0.2"), clientFrom(t, "127.0.0.3")
		attacker, valid = map[int]int{}, map[int]int{}
		for range 60 {
			attacker[limitThrough(t, bad, proxy.URL, "wrong-key")]++
			valid[limitThrough(t, good, proxy.URL, "dev-key")]++
		}
		return attacker, valid, p
	}
	t.Run("trusted", func(t *testing.T) {
		attacker, valid, p := run(t, "LEASH_HTTP_TRUSTED_PROXIES=127.0.0.1/32")
		if attacker[429] == 0 || attacker[401] == 0 || attacker[401]+attacker[429] != 60 {
			t.Errorf("the attacker's answers %v: want 401s, then 429s", attacker)
		}
		if valid[200] != 60 {
			t.Errorf("the valid client's answers %v: want only 200s", valid)
		}
		var named bool
		for _, l := range p.Logs() {
			if l["msg"] == "request refused" {
				if l["client"] != "127.0.0.2" {
					t.Fatalf("a refusal logged for client %v, want the attacker's 127.0.0.2", l["client"])
				}
				named = true
			}
		}
		if !named {
			t.Error("no refusal was logged")
		}
		p.NoCrash(t)
	})
	t.Run("not trusted", func(t *testing.T) {
		_, valid, p := run(t)
		if valid[429] == 0 {
			t.Errorf("the valid client's answers %v: without trusted proxies it shares the proxy's address and is slowed", valid)
		}
		// A forged header sent straight to Leash changes nothing either.
		direct := clientFrom(t, "127.0.0.4")
		for i := range 30 {
			req, _ := http.NewRequest("POST", p.URL+"/v1/limit", strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer wrong-key")
			req.Header.Set("X-Forwarded-For", "192.0.2."+strconv.Itoa(i+1))
			if res, err := direct.Do(req); err == nil {
				res.Body.Close()
			}
		}
		if s := limitThrough(t, direct, p.URL, "dev-key"); s != 429 {
			t.Errorf("a valid key from the slowed address: %d, want 429", s)
		}
		p.NoCrash(t)
	})
}
