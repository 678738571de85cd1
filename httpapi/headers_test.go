package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/httpapi"
)

// serveOn serves h on a loopback listener with httpapi.NewServer and returns its address.
func serveOn(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.NewServer(ln.Addr().String(), h)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// rawRequest sends one request written by hand and returns the response.
func rawRequest(t *testing.T, addr, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = io.WriteString(c, req) }()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// TestHeaderTooLarge: headers over 64 KiB (a cookie, an Authorization header, a long
// query string) are 431 request_header_too_large with the JSON error body, on the /v1
// listener (the API itself, or a handler in front of it such as the console's mount, with
// the API's X-Request-Id) and on a plain handler (the admin listener) alike (spec §3.10).
func TestHeaderTooLarge(t *testing.T) {
	e := newEnv(t, nil)
	big := strings.Repeat("a", 100<<10)
	cases := []struct{ name, req string }{
		{"cookie", "POST /v1/limit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyAcme + "\r\nCookie: c=" + big + "\r\nContent-Length: 0\r\n\r\n"},
		{"authorization", "POST /v1/limit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + big + "\r\nContent-Length: 0\r\n\r\n"},
		{"query string", "GET /v1/namespaces/api/rules?q=" + strings.Repeat("b", 80_000) + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyAcme + "\r\n\r\n"},
	}
	for _, h := range []struct {
		name    string
		handler http.Handler
		reqID   bool
	}{{"api", e.api, true}, {"fronted", httpapi.Front(e.api, http.NotFoundHandler()), true}, {"plain handler", http.NotFoundHandler(), false}} {
		addr := serveOn(t, h.handler)
		for _, c := range cases {
			res, body := rawRequest(t, addr, c.req)
			if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Fatalf("%s, %s: status %d, want 431 (body %q)", h.name, c.name, res.StatusCode, body)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s, %s: Content-Type %q", h.name, c.name, ct)
			}
			var eb struct{ Error, Code string }
			if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Code != "request_header_too_large" || eb.Error == "" {
				t.Errorf("%s, %s: body %q, want the JSON error with code request_header_too_large", h.name, c.name, body)
			}
			if h.reqID && res.Header.Get("X-Request-Id") == "" {
				t.Errorf("%s, %s: no X-Request-Id", h.name, c.name)
			}
		}
	}
	// Just under the bound is served as usual (here: 401, no valid key).
	addr := serveOn(t, e.api)
	under := strings.Repeat("c", httpapi.MaxHeaderBytes-200)
	res, body := rawRequest(t, addr, "POST /v1/limit HTTP/1.1\r\nHost: x\r\nCookie: c="+under+"\r\nContent-Length: 0\r\n\r\n")
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("headers under the bound: status %d (body %q), want 401", res.StatusCode, body)
	}
}
