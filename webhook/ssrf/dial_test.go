package ssrf

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestClientRefusesBlockedAddress(t *testing.T) {
	srv := newServer(t) // listens on 127.0.0.1
	c := Policy{AllowHTTP: true}.Client(2 * time.Second)
	resp, err := c.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s under the production policy succeeded", srv.URL)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("GET %s: %v, want an *Error from the dialer", srv.URL, err)
	}
}

func TestClientAdmitsPrivateForTests(t *testing.T) {
	srv := newServer(t)
	c := Policy{AllowHTTP: true, AllowPrivateTargets: true}.Client(2 * time.Second)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("GET %s: %v", srv.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("GET %s = %d %q, want 200 \"ok\"", srv.URL, resp.StatusCode, body)
	}
}

func TestClientFollowsNoRedirect(t *testing.T) {
	srv := newServer(t)
	c := Policy{AllowHTTP: true, AllowPrivateTargets: true}.Client(2 * time.Second)
	resp, err := c.Get(srv.URL + "/redirect")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status = %d, want 302 returned as is", resp.StatusCode)
	}
	if loc := resp.Header.Get("Location"); loc != "http://169.254.169.254/latest/meta-data/" {
		t.Fatalf("Location = %q", loc)
	}
}

func TestClientUsesNoProxy(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	tr := Policy{}.Client(0).Transport.(*http.Transport)
	if tr.Proxy != nil {
		t.Fatal("transport has a proxy function")
	}
}

// TestControlRefusesRebinding dials a name, as the delivery client does,
// that resolves to loopback when the connection is made: the dialer's
// Control refuses every address.
func TestControlRefusesRebinding(t *testing.T) {
	srv := newServer(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	d := net.Dialer{Timeout: 2 * time.Second, Control: Policy{}.Control}
	conn, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port))
	if err == nil {
		conn.Close()
		t.Fatal("dial to localhost succeeded")
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("dial: %v, want an *Error", err)
	}

	d.Control = Policy{AllowPrivateTargets: true}.Control
	conn, err = d.DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatalf("dial with AllowPrivateTargets: %v", err)
	}
	conn.Close()
}

func TestControl(t *testing.T) {
	for _, tt := range []struct {
		p                Policy
		network, address string
		ok               bool
	}{
		{Policy{}, "tcp4", "1.1.1.1:443", true},
		{Policy{}, "tcp6", "[2606:4700:4700::1111]:443", true},
		{Policy{}, "tcp4", "127.0.0.1:443", false},
		{Policy{}, "tcp6", "[::1]:443", false},
		{Policy{}, "tcp6", "[::ffff:10.0.0.1]:443", false},
		{Policy{}, "tcp4", "169.254.169.254:80", false},
		{Policy{}, "udp4", "1.1.1.1:53", false},
		{Policy{}, "tcp", "example.com:443", false},
		{Policy{AllowPrivateTargets: true}, "tcp4", "127.0.0.1:443", true},
		{Policy{AllowPrivateTargets: true}, "tcp4", "10.0.0.1:443", true},
		{Policy{AllowPrivateTargets: true}, "tcp4", "169.254.169.254:80", false},
		{Policy{AllowPrivateTargets: true}, "tcp6", "[fe80::1%eth0]:80", false},
	} {
		err := tt.p.Control(tt.network, tt.address, nil)
		if (err == nil) != tt.ok {
			t.Errorf("%+v.Control(%q, %q) = %v, want ok %v", tt.p, tt.network, tt.address, err, tt.ok)
		}
	}
}
