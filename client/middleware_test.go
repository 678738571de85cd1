package client_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/client"
)

func hello(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) }

// get sends GET url with an X-User header and returns the answer and its decoded body.
func get(t *testing.T, url, user string) (*http.Response, map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if user != "" {
		req.Header.Set("X-User", user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	json.NewDecoder(resp.Body).Decode(&body)
	return resp, body
}

// TestMiddleware: allowed requests carry RateLimit-*; a denied one is 429 with the JSON
// error, RateLimit-* and Retry-After; a request without a key is not checked; a hard cap
// is 429 hard_cap_exceeded.
func TestMiddleware(t *testing.T) {
	p := startLeash(t)
	c := newClient(t, p.URL, keyScale)
	mw := client.Middleware(c, client.MiddlewareOptions{Namespace: "web", Key: client.KeyByHeader("X-User"),
		Algorithm: client.FixedWindow, Limit: 2, Window: time.Minute})
	app := httptest.NewServer(mw(http.HandlerFunc(hello)))
	defer app.Close()

	for i, want := range []string{"1", "0"} {
		resp, _ := get(t, app.URL, "alice")
		if resp.StatusCode != 200 || resp.Header.Get("RateLimit-Limit") != "2" || resp.Header.Get("RateLimit-Remaining") != want ||
			resp.Header.Get("RateLimit-Reset") == "" || resp.Header.Get("Retry-After") != "" {
			t.Fatalf("request %d: %d %v", i, resp.StatusCode, resp.Header)
		}
	}
	resp, body := get(t, app.URL, "alice")
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != 429 || body["code"] != client.CodeRateLimited || body["error"] == "" || ra < 1 || ra > 60 ||
		resp.Header.Get("RateLimit-Remaining") != "0" || resp.Header.Get("RateLimit-Limit") != "2" ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("denied: %d %v %v", resp.StatusCode, resp.Header, body)
	}
	if resp, _ := get(t, app.URL, "bob"); resp.StatusCode != 200 {
		t.Fatalf("another key denied: %d", resp.StatusCode)
	}
	if resp, _ := get(t, app.URL, ""); resp.StatusCode != 200 || resp.Header.Get("RateLimit-Limit") != "" {
		t.Fatalf("no key: %d %v", resp.StatusCode, resp.Header)
	}

	// An account over its hard cap: 429 with Leash's own body.
	capped := client.Middleware(newClient(t, p.URL, keyCapped), client.MiddlewareOptions{Namespace: "web",
		Key: client.KeyByHeader("X-User"), Limit: 100, Window: time.Minute})
	capp := httptest.NewServer(capped(http.HandlerFunc(hello)))
	defer capp.Close()
	for range 3 {
		get(t, capp.URL, "u")
	}
	resp, body = get(t, capp.URL, "u")
	if resp.StatusCode != 429 || body["code"] != client.CodeHardCapExceeded || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the hard cap: %d %v %v", resp.StatusCode, resp.Header, body)
	}
}

// TestMiddlewareFailure: with Leash unreachable (every connection hung up), fail open serves the request, fail closed
// answers 503; OnError sees the error either way.
func TestMiddlewareFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A listener that hangs up on every connection: a transport error, on a port no other
	// test can take meanwhile (a closed port could be reused by a parallel test's server).
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	dead := "http://" + ln.Addr().String()
	c := newClient(t, dead, "k")
	for _, closed := range []bool{false, true} {
		var seen atomic.Int32
		var last atomic.Value
		mw := client.Middleware(c, client.MiddlewareOptions{Namespace: "web", Key: client.KeyByHeader("X-User"),
			Limit: 1, Window: time.Second, FailClosed: closed,
			OnError: func(r *http.Request, err error) { seen.Add(1); last.Store(err) }})
		app := httptest.NewServer(mw(http.HandlerFunc(hello)))
		resp, body := get(t, app.URL, "alice")
		app.Close()
		want := 200
		if closed {
			want = 503
		}
		if resp.StatusCode != want || seen.Load() != 1 || !client.IsUnavailable(last.Load().(error)) {
			t.Fatalf("FailClosed=%v: %d, OnError %d times", closed, resp.StatusCode, seen.Load())
		}
		if closed && (body["code"] != client.CodeUnavailable || resp.Header.Get("Retry-After") != "1") {
			t.Fatalf("fail closed answered %v %v", resp.Header, body)
		}
	}

	// A 503 from Leash itself (its store down) is handled the same way.
	leash := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(503)
		w.Write([]byte(`{"error":"service temporarily unavailable","code":"unavailable"}`))
	}))
	defer leash.Close()
	var got error
	mw := client.Middleware(newClient(t, leash.URL, "k"), client.MiddlewareOptions{Namespace: "web", FailClosed: true,
		OnError: func(r *http.Request, err error) { got = err }})
	rec := httptest.NewRecorder()
	mw(http.HandlerFunc(hello)).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	var e *client.Error
	if rec.Code != 503 || !errors.As(got, &e) || e.Code != client.CodeUnavailable {
		t.Fatalf("Leash 503, fail closed: %d, OnError %v", rec.Code, got)
	}
}

func TestKeyFuncs(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "[2001:db8::1]:4321"
	r.Header.Set("Authorization", "bearer tok-1")
	if client.KeyByIP(r) != "2001:db8::1" || client.KeyByBearer(r) != "tok-1" || client.KeyByHeader("X-None")(r) != "" {
		t.Fatalf("keys: %q %q", client.KeyByIP(r), client.KeyByBearer(r))
	}
	r.Header.Set("Authorization", "Basic abc")
	if client.KeyByBearer(r) != "" {
		t.Fatal("Basic credentials taken as a bearer key")
	}
}
