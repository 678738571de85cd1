package cli

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/leashd/leash/client"
	"github.com/leashd/leash/testkit"
)

func TestParseInterleaved(t *testing.T) {
	tests := []struct {
		args []string
		pos  []string
		n    int64
	}{
		{[]string{"a", "b", "--n", "3"}, []string{"a", "b"}, 3},
		{[]string{"--n=3", "a", "b"}, []string{"a", "b"}, 3},
		{[]string{"a", "--n", "3", "b"}, []string{"a", "b"}, 3},
		{[]string{"a", "--", "-b", "--n"}, []string{"a", "-b", "--n"}, 0},
		{[]string{"--n", "3", "--", "--n", "4", "--"}, []string{"--n", "4", "--"}, 3},
		{[]string{"a", "--n", "3", "--"}, []string{"a"}, 3},
		{[]string{"--", "a", "--n", "3"}, []string{"a", "--n", "3"}, 0},
	}
	for _, tc := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n := fs.Int64("n", 0, "")
		pos, err := ParseInterleaved(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || *n != tc.n {
			t.Errorf("%v: %v %d %v, want %v %d", tc.args, pos, *n, err, tc.pos, tc.n)
		}
	}
}

func TestOverrideFlag(t *testing.T) {
	var o overrideFlag
	// The last '=' ends the key: Envoy fallback counter keys hold '=' (spec §6.7).
	for _, v := range []string{"big=1000", "slow=1:60000", "remote_address=10.0.0.1=50", "a=b=c=7:1000"} {
		if err := o.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	want := overrideFlag{{Key: "big", Limit: 1000}, {Key: "slow", Limit: 1, WindowMS: testkit.Ptr[int64](60000)},
		{Key: "remote_address=10.0.0.1", Limit: 50}, {Key: "a=b=c", Limit: 7, WindowMS: testkit.Ptr[int64](1000)}}
	if len(o) != 4 || o[0] != want[0] || o[1].Key != "slow" || *o[1].WindowMS != 60000 || o[2] != want[2] ||
		o[3].Key != want[3].Key || o[3].Limit != 7 || *o[3].WindowMS != 1000 {
		t.Fatalf("parsed %+v", o)
	}
	for _, bad := range []string{"nolimit", "=5", "k=x", "k=1:y", "k=1=x", "remote_address=10.0.0.1"} {
		if err := o.Set(bad); err == nil {
			t.Errorf("--override %q accepted", bad)
		}
	}
}

func TestRenderStats(t *testing.T) {
	days := make([]client.DayUsage, 30)
	for i := range days {
		days[i].Day = "2026-11-" + string(rune('0'+i/10)) + string(rune('0'+i%10))
	}
	days[28] = client.DayUsage{Day: "2026-11-28", Total: 50, Blocked: 10}
	days[29] = client.DayUsage{Day: "2026-11-29", Total: 100}
	hc := int64(200)
	out := renderStats(&client.Stats{Namespace: "api", Total: 150, Blocked: 10, Days: days,
		Month: client.MonthUsage{Month: "2026-11", Total: 1500, Quota: 1000, OverQuota: true, HardCap: &hc}})
	for _, want := range []string{
		"api: 150 decisions in 30 days, 10 blocked\n",
		"2026-11-28 " + strings.Repeat("█", 16) + strings.Repeat("░", 4) + strings.Repeat(" ", 20) + " 50 (10 blocked)\n",
		"2026-11-29 " + strings.Repeat("█", 40) + " 100\n",
		"month 2026-11 (all namespaces): 1,500 of quota 1,000 (150.0%)  OVER QUOTA\n",
		"hard cap: 200 (750.0% used)  REACHED",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stats lack %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n2026-11-"); n != 30 {
		t.Errorf("%d day lines", n)
	}
	if group(1234567) != "1,234,567" || group(12) != "12" || group(-1000) != "-1,000" {
		t.Error("group")
	}
}

func TestRunUsage(t *testing.T) {
	var out, errb bytes.Buffer
	env := func(string) string { return "" }
	if code := Run(context.Background(), []string{"stats"}, env, &out, &errb); code != ExitUsage ||
		!strings.Contains(errb.String(), "leash stats NAMESPACE") || strings.Contains(errb.String(), "leash limit") {
		t.Fatalf("stats without a namespace: %d %q", code, errb.String())
	}
	out.Reset()
	if code := Run(context.Background(), []string{"limit", "--help"}, env, &out, &errb); code != ExitOK || !strings.Contains(out.String(), "usage:") {
		t.Fatalf("--help: %d %q", code, out.String())
	}
}

// TestHelp: --help or -h on any verb or sub-verb prints that command's usage on stdout and
// exits 0, wherever it comes among the arguments; a group (lease, rules, webhook) lists its
// sub-verbs, a sub-verb only itself.
func TestHelp(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		args  []string
		lines []string // the usage lines, "  leash ..." each, in order
	}{
		{[]string{"limit"}, []string{"limit NAMESPACE KEY [--algorithm A] [--limit N] [--window-ms MS] [--cost N]"}},
		{[]string{"limit", "api", "k"}, []string{"limit NAMESPACE KEY [--algorithm A] [--limit N] [--window-ms MS] [--cost N]"}},
		{[]string{"reset"}, []string{"reset NAMESPACE KEY [--algorithm A] [--window-ms MS]"}},
		{[]string{"lease"}, []string{"lease acquire NAMESPACE KEY [--limit N] [--window-ms MS]", "lease release LEASE_ID",
			"lease renew LEASE_ID [--window-ms MS]"}},
		{[]string{"lease", "acquire"}, []string{"lease acquire NAMESPACE KEY [--limit N] [--window-ms MS]"}},
		{[]string{"lease", "release"}, []string{"lease release LEASE_ID"}},
		{[]string{"lease", "renew", "some-id"}, []string{"lease renew LEASE_ID [--window-ms MS]"}},
		{[]string{"rules"}, []string{"rules list NAMESPACE",
			"rules set NAMESPACE --algorithm A --limit N --window-ms MS [--name NAME] [--override KEY=LIMIT[:WINDOW_MS]]...",
			"rules delete NAMESPACE rate|concurrent"}},
		{[]string{"rules", "list"}, []string{"rules list NAMESPACE"}},
		{[]string{"rules", "set"}, []string{"rules set NAMESPACE --algorithm A --limit N --window-ms MS [--name NAME] [--override KEY=LIMIT[:WINDOW_MS]]..."}},
		{[]string{"rules", "delete"}, []string{"rules delete NAMESPACE rate|concurrent"}},
		{[]string{"stats"}, []string{"stats NAMESPACE"}},
		{[]string{"webhook"}, []string{"webhook get", "webhook set URL", "webhook delete", "webhook test"}},
		{[]string{"webhook", "get"}, []string{"webhook get"}},
		{[]string{"webhook", "set"}, []string{"webhook set URL"}},
		{[]string{"webhook", "delete"}, []string{"webhook delete"}},
		{[]string{"webhook", "test"}, []string{"webhook test"}},
	} {
		for _, h := range []string{"--help", "-h"} {
			args := append(slices.Clone(tc.args), h)
			var out, errb bytes.Buffer
			code := Run(context.Background(), args, env, &out, &errb)
			var got []string
			for l := range strings.Lines(out.String()) {
				if rest, ok := strings.CutPrefix(l, "  leash "); ok {
					got = append(got, strings.TrimSpace(strings.SplitN(rest, "  ", 2)[0]))
				}
			}
			if code != ExitOK || errb.Len() > 0 || !strings.HasPrefix(out.String(), "usage:\n") || !slices.Equal(got, tc.lines) {
				t.Errorf("%v: exit %d, stderr %q, usage lines %q, want %q\n%s", args, code, errb.String(), got, tc.lines, out.String())
			}
			if len(tc.lines) == 1 && !strings.Contains(out.String(), "--timeout") {
				t.Errorf("%v: the flags are not described:\n%s", args, out.String())
			}
		}
	}
	// Before the verb's name it is still that verb's help; after "--" it is an argument.
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"lease", "--help", "acquire"}, env, &out, &errb); code != ExitOK ||
		!strings.Contains(out.String(), "leash lease release") {
		t.Errorf("lease --help acquire: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	closed := func(k string) string { // a loopback port nothing listens on
		switch k {
		case "LEASH_URL":
			return "http://127.0.0.1:1"
		case "LEASH_API_KEY":
			return "lsh_x"
		}
		return ""
	}
	if code := Run(context.Background(), []string{"stats", "--", "--help"}, closed, &out, &errb); code != ExitService {
		t.Errorf("stats -- --help: exit %d, want the call tried (--help is the namespace)", code)
	}
}

// TestVerbsInUsage: every verb has its place in the help order, and Usage, which the
// binary's own usage prints, shows each verb's synopsis (webhook's four on one line).
func TestVerbsInUsage(t *testing.T) {
	if len(order) != len(verbs) {
		t.Errorf("order has %d verbs, verbs %d", len(order), len(verbs))
	}
	for _, name := range order {
		v, ok := verbs[name]
		if !ok || !strings.HasPrefix(v.synopsis, name) || v.about == "" {
			t.Errorf("verb %q: %+v", name, v.synopsis)
			continue
		}
		if sub, ok := strings.CutPrefix(v.synopsis, "webhook "); ok {
			if !strings.Contains(Usage, "  leash webhook get | set URL | delete | test\n") || !strings.Contains("get | set URL | delete | test", sub) {
				t.Errorf("Usage lacks webhook %s", sub)
			}
			continue
		}
		if !strings.Contains(Usage, "  leash "+v.synopsis+"\n") && !strings.Contains(Usage, "  leash "+v.synopsis+"  ") {
			t.Errorf("Usage lacks %q", v.synopsis)
		}
	}
}

// webhook get with none set says so in the API's own words (spec §8.1).
func TestWebhookGetNoneWording(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"no webhook is configured","code":"webhook_not_found"}`))
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	env := func(string) string { return "" }
	code := Run(context.Background(), []string{"webhook", "get", "--url", srv.URL, "--key", "k"}, env, &out, &errb)
	if code != ExitService || !strings.Contains(errb.String(), "webhook_not_found (404): no webhook is configured") {
		t.Fatalf("webhook get: %d %q", code, errb.String())
	}
}
