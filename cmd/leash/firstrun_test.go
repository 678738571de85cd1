package main

import (
	"strings"
	"testing"

	"github.com/leashd/leash/testkit/leashproc"
)

// The variables README's walkthrough exports for the command line (and LEASH_SRC of its
// Go section) are no config keys: serve and check-config start with them set (spec §10.1).
func TestWalkthroughVariablesDoNotStopServe(t *testing.T) {
	walk := []string{"LEASH_URL=http://localhost:8080", "LEASH_API_KEY=lsh_x", "LEASH_OPERATOR_KEY=lsh_y", "LEASH_SRC=/src/leash"}
	p := leashproc.Start(t, binary, nil, append([]string{"LEASH_DEV_API_KEY=walk-key"}, walk...)...)
	if code, _ := leashproc.Call(t, "POST", "http://"+p.HTTP+"/v1/limit", "walk-key", `{"namespace":"d","key":"k","limit":1,"window_ms":1000}`); code != 200 {
		t.Fatalf("check = %d", code)
	}
	code, out, errOut := leashCLI(t, walk, "check-config")
	if code != 0 || !strings.Contains(out, "valid") {
		t.Fatalf("check-config with the walkthrough's variables: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = leashCLI(t, []string{"LEASH_HTTP_ADRR=:1"}, "check-config")
	if code != 1 || !strings.Contains(errOut, "did you mean LEASH_HTTP_ADDR?") {
		t.Fatalf("a mistyped variable: exit %d\n%s", code, errOut)
	}
}
