package main

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/leashd/leash/testkit/leashproc"
)

var bin string

func TestMain(m *testing.M) { os.Exit(leashproc.Main(m, &bin)) }

// TestDemo runs the example against a real leash serve: the 6th /hello is limited, and a
// third export is refused after the first two's TTL because KeepAlive renewed them.
func TestDemo(t *testing.T) {
	p := leashproc.Start(t, bin, nil, "LEASH_DEV_API_KEY=example-key")
	env := map[string]string{"LEASH_URL": p.URL, "LEASH_API_KEY": "example-key"}
	var out strings.Builder
	if err := run(context.Background(), []string{"-demo", "-addr", "127.0.0.1:0", "-work", "2500ms"},
		func(k string) string { return env[k] }, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"GET /hello #5: 200\n", "GET /hello #6: 429\n",
		"POST /export while two run (after their TTL): 429\n",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "POST /export: 200\n") != 2 {
		t.Fatalf("the two exports did not both finish:\n%s", got)
	}
	if strings.Contains(got, "level=WARN") {
		t.Fatalf("the middleware failed open:\n%s", got)
	}
}

// TestDemoPicksFreePort: -demo without -addr serves on a free loopback port, as the
// package doc says, so it runs while something else holds the default 127.0.0.1:8000.
func TestDemoPicksFreePort(t *testing.T) {
	if ln, err := net.Listen("tcp", "127.0.0.1:8000"); err == nil { // else it is taken already
		defer ln.Close()
	}
	p := leashproc.Start(t, bin, nil, "LEASH_DEV_API_KEY=example-key")
	env := map[string]string{"LEASH_URL": p.URL, "LEASH_API_KEY": "example-key"}
	var out strings.Builder
	if err := run(context.Background(), []string{"-demo", "-work", "2500ms"},
		func(k string) string { return env[k] }, &out); err != nil {
		t.Fatalf("-demo without -addr: %v", err)
	}
	if got := out.String(); strings.Contains(got, "addr=127.0.0.1:8000 ") || !strings.Contains(got, "addr=127.0.0.1:") {
		t.Fatalf("-demo did not log a free loopback port:\n%s", got)
	}
}
