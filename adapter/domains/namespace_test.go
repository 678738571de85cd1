package domains_test

import (
	"strings"
	"testing"

	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/engine"
)

func TestNamespace(t *testing.T) {
	if got := domains.Namespace("edge_proxy"); got != "edge_proxy" {
		t.Fatalf("a valid namespace maps to %q", got)
	}
	seen := map[string]string{}
	for _, d := range []string{"default/eg/http", "default.eg.http", "default/eg/https", "/leading", "ns/gw/ls-ns/ls/name",
		"d-9f", "é/ü", strings.Repeat("x/", 128)} {
		ns := domains.Namespace(d)
		if !engine.ValidNamespace(ns) {
			t.Errorf("Namespace(%q) = %q, not a valid namespace", d, ns)
		}
		if prev, dup := seen[ns]; dup {
			t.Errorf("%q and %q share namespace %q", prev, d, ns)
		}
		seen[ns] = d
	}
	if got := domains.Namespace("default/eg/http"); !strings.HasPrefix(got, "default.eg.http-") || len(got) != len("default.eg.http-")+12 {
		t.Fatalf("Namespace(default/eg/http) = %q", got)
	}
	if got := domains.Namespace("/leading"); !strings.HasPrefix(got, "d.leading-") {
		t.Fatalf("Namespace(/leading) = %q", got)
	}
}
