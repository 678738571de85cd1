package doctest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// assignRE is one NAME=value word that starts a shell command.
var assignRE = regexp.MustCompile(`^([A-Z_][A-Z0-9_]*)=(\S*)$`)

// TestRedisDocOpensWithAStart: docs/redis.md's first code block starts Leash on a local
// Redis. Its `make run` line's variables are given to `leash serve` (the Redis URL
// pointed at this test's own redis-server), which must serve a check whose counter lands
// in that Redis.
func TestRedisDocOpensWithAStart(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root(), "docs", "redis.md"))
	if err != nil {
		t.Fatal(err)
	}
	var first []string // the lines of the document's first fenced block
	in := false
	for l := range strings.Lines(string(doc)) {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if in {
				break
			}
			in = true
			continue
		}
		if in {
			first = append(first, strings.TrimSpace(l))
		}
	}
	var env []string
	for _, l := range first {
		if !strings.Contains(l, "make run") && !strings.Contains(l, "leash serve") {
			continue
		}
		for _, w := range strings.Fields(l) {
			m := assignRE.FindStringSubmatch(w)
			if m == nil {
				break
			}
			env = append(env, m[1]+"="+m[2])
		}
	}
	if !strings.Contains(strings.Join(env, " "), "LEASH_STORE_BACKEND=redis") {
		t.Fatalf("docs/redis.md's first code block starts no Leash on Redis: %q", first)
	}
	r := redistest.StartServer(t, false)
	env = append(env, "LEASH_STORE_REDIS_URL="+r.URL(), "LEASH_DEV_API_KEY=redis-doc-key")
	p := leashproc.Start(t, bin, nil, env...)
	if code, out := leashproc.Call(t, "POST", p.URL+"/v1/namespaces/doc/rules", "redis-doc-key",
		`{"algorithm":"fixed_window","limit":5,"window_ms":60000}`); code/100 != 2 {
		t.Fatalf("a rule set on the documented start: %d %v", code, out)
	}
	if code, out := leashproc.Call(t, "POST", p.URL+"/v1/limit", "redis-doc-key", `{"namespace":"doc","key":"k"}`); code != 200 || out["allowed"] != true {
		t.Fatalf("a check on the documented start: %d %v", code, out)
	}
	rc := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer rc.Close()
	keys, err := rc.Keys(context.Background(), "{leash:*").Result() // the rule, written through
	if err != nil || len(keys) == 0 {
		t.Fatalf("no leash keys in Redis after a rule was set: %v %v", keys, err)
	}
	p.NoCrash(t)
}
