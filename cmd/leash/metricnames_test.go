package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
)

// Files that query or document Leash's metrics (spec §12.2, §12.9).
const (
	dashboardPath = "../../deploy/helm/leash/files/leash-dashboard.json"
	alertsPath    = "../../deploy/helm/leash/files/leash-alerts.yaml"
	specPath      = "../../docs/spec.md"
	opsPath       = "../../docs/operations.md"
)

// family is one metric family of a /metrics page: its type and the label names its
// samples carry.
type family struct {
	typ    string
	labels map[string]bool
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
var labelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)

// scrape reads the families of a /metrics page.
func scrape(t *testing.T, url string, into map[string]*family) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if into[name] == nil {
				into[name] = &family{typ: typ, labels: map[string]bool{}}
			}
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[1]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && into[base] != nil && (into[base].typ == "histogram" || into[base].typ == "summary") {
				name = base
			}
		}
		f := into[name]
		if f == nil {
			continue
		}
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			if l[1] != "le" && l[1] != "quantile" {
				f.labels[l[1]] = true
			}
		}
	}
}

// exposed reports whether a queried series name is served: a family, or a histogram's
// or summary's _bucket, _sum or _count series.
func exposed(fams map[string]*family, name string) bool {
	if fams[name] != nil {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f := fams[base]; f != nil && (f.typ == "histogram" || (f.typ == "summary" && suffix != "_bucket")) {
				return true
			}
		}
	}
	return false
}

// metricRef finds the metric names an expression queries: Leash's, the Go runtime's and
// the process collector's.
var metricRef = regexp.MustCompile(`\b(?:leash|go|process)_[a-zA-Z0-9_]+\b`)

// exerciseLeash starts leash on the memory store with descriptor files, a plan with a tiny
// hard cap and every kind of call, so every metric family it can expose has a series.
func exerciseLeash(t *testing.T) *leashproc.Proc {
	t.Helper()
	dir := t.TempDir()
	descDir := filepath.Join(dir, "ratelimit")
	if err := os.Mkdir(descDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(descDir, "edge.yaml"), []byte(
		"domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"+
			"  - key: shadow\n    shadow_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An xDS management server that hangs up on every connection: the xDS metrics exist
	// only when envoy.xds.address is set.
	xds, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xds.Close() })
	go func() {
		for {
			conn, err := xds.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	cfg := filepath.Join(dir, "leash.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `accounts:
  - {id: acme, plan: pro, api_keys: [key-acme]}
  - {id: capped, plan: free, api_keys: [key-capped]}
plans:
  free: {hard_cap: 2}
envoy:
  config_paths: [%s]
  domains: {edge: {account: acme}}
  local_cache: {max_entries: 100}
  xds: {address: "%s"}
metrics:
  namespaces: [shop]
`, descDir, xds.Addr()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := leashproc.Start(t, binary, []string{"--config", cfg}, "LEASH_STORE_BACKEND=memory")
	check := `{"namespace":"shop","key":"k","algorithm":"fixed_window","limit":1,"window_ms":60000}`
	for range 2 {
		leashproc.Call(t, "POST", p.URL+"/v1/limit", "key-acme", check)
	}
	leashproc.Call(t, "POST", p.URL+"/v1/leases", "key-acme", `{"namespace":"jobs","key":"k","limit":1,"window_ms":60000}`)
	leashproc.Call(t, "GET", p.URL+"/v1/nowhere", "key-acme", "")
	c := leashproc.DialRLS(t, p.GRPC)
	for _, d := range []string{"user", "user", "user", "shadow", "shadow"} {
		if _, err := c.ShouldRateLimit(context.Background(), leashproc.Request("edge", leashproc.Entry(d, "v"))); err != nil {
			t.Fatal(err)
		}
	}
	// The hard cap: usage reaches the store within about a second.
	testkit.Eventually(t, "the hard cap of 2 refuses a check", 10*time.Second, func() bool {
		code, _ := leashproc.Call(t, "POST", p.URL+"/v1/limit", "key-capped", `{"namespace":"n","key":"k","algorithm":"fixed_window","limit":100,"window_ms":60000}`)
		return code == http.StatusTooManyRequests
	})
	return p
}

// TestDashboardAndAlertsQueryExposedMetrics: every metric name the Grafana dashboard and
// the alerting rules query (spec §12.9) is exposed by /metrics of a running leash, on the
// memory store, on the Redis store and on the disk store; and spec §12.2 and docs/operations.md's metrics section
// name every leash_* family /metrics exposes, with each of its labels in spec §12.2, and
// no family /metrics lacks (with an xDS server configured, for the xDS families).
func TestDashboardAndAlertsQueryExposedMetrics(t *testing.T) {
	fams := map[string]*family{}
	p := exerciseLeash(t)
	scrape(t, "http://"+p.Admin+"/metrics", fams)
	r := redistest.StartServer(t, false)
	// On Redis, with an xDS server configured (an address nothing answers: the xDS
	// families exist all the same).
	pr := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=k", "LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL="+r.URL(),
		"LEASH_ENVOY_XDS_ADDRESS=127.0.0.1:1", "LEASH_ENVOY_XDS_NODE_ID=leash-test")
	scrape(t, "http://"+pr.Admin+"/metrics", fams)
	// On the disk store, the default (in the test's own folder): its own gauges.
	pd := leashproc.Start(t, binary, nil, "LEASH_DEV_API_KEY=k")
	scrape(t, "http://"+pd.Admin+"/metrics", fams)

	// Every name queried is exposed.
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
	}
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	queried := map[string][]string{} // name → where
	for _, pn := range dash.Panels {
		for _, tg := range pn.Targets {
			if err := balanced(tg.Expr); err != nil {
				t.Errorf("dashboard panel %s: %v in %s", pn.Title, err, tg.Expr)
			}
			for _, n := range metricRef.FindAllString(tg.Expr, -1) {
				queried[n] = append(queried[n], "dashboard panel "+pn.Title)
			}
		}
	}
	for _, v := range dash.Templating.List {
		for _, n := range metricRef.FindAllString(v.Definition, -1) {
			queried[n] = append(queried[n], "dashboard variable "+v.Name)
		}
	}
	alerts, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	exprs := regexp.MustCompile(`(?ms)expr: \|\n(.*?)\n\s+(?:for|labels):|expr: ([^|\n][^\n]*)`).FindAllStringSubmatch(string(alerts), -1)
	if n := strings.Count(string(alerts), "- alert: "); len(exprs) != n {
		t.Errorf("found %d expressions for %d alerts", len(exprs), n)
	}
	for i, expr := range exprs {
		if err := balanced(expr[1] + expr[2]); err != nil {
			t.Errorf("alert %d: %v in %s", i, err, expr[0])
		}
	}
	alert := ""
	for _, line := range strings.Split(string(alerts), "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: "); ok {
			alert = a
			continue
		}
		if alert == "" || strings.Contains(line, "summary:") || strings.Contains(line, "description:") {
			continue
		}
		for _, n := range metricRef.FindAllString(line, -1) {
			queried[n] = append(queried[n], "alert "+alert)
		}
	}
	if len(queried) < 15 {
		t.Fatalf("only %d metric names found in the dashboard and alerts: %v", len(queried), queried)
	}
	for _, n := range slices.Sorted(maps.Keys(queried)) {
		if !exposed(fams, n) {
			t.Errorf("%s queries %s, which /metrics does not expose", strings.Join(slices.Compact(queried[n]), ", "), n)
		}
	}

	// spec §12.2 and docs/operations.md name every leash_* family, and the spec each label.
	spec := section(t, specPath, "### §12.2 Metrics", "\n### ")
	ops := section(t, opsPath, "## Health, metrics, tracing and shutdown", "\n## ")
	rows := map[string]string{} // family → its row of the spec's table
	for _, line := range strings.Split(spec, "\n") {
		if m := regexp.MustCompile("^\\| `(leash_[a-z0-9_]+)` \\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "leash_") {
			continue
		}
		row, ok := rows[name]
		if !ok {
			t.Errorf("spec §12.2 has no row for %s", name)
		}
		for l := range f.labels {
			if ok && !strings.Contains(row, "`"+l+"`") {
				t.Errorf("spec §12.2's row of %s does not name its label %s", name, l)
			}
		}
		if !strings.Contains(ops, name) {
			t.Errorf("docs/operations.md's metrics section does not name %s", name)
		}
	}
	for name := range rows {
		if fams[name] == nil {
			t.Errorf("spec §12.2 lists %s, which /metrics does not expose", name)
		}
	}
}

// balanced checks an expression's brackets pair up, outside quoted strings: the least a
// query must get right.
func balanced(expr string) error {
	var stack []rune
	inString := false
	for _, r := range expr {
		switch {
		case r == '"':
			inString = !inString
		case inString:
		case strings.ContainsRune("({[", r):
			stack = append(stack, r)
		case strings.ContainsRune(")}]", r):
			open := map[rune]rune{')': '(', '}': '{', ']': '['}[r]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return fmt.Errorf("unmatched %q", r)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 || inString {
		return fmt.Errorf("unclosed %q", stack)
	}
	return nil
}

// section returns the text of a file from the line start to the next end marker.
func section(t *testing.T, path, start, end string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, start)
	if i < 0 {
		t.Fatalf("%s has no %q", path, start)
	}
	s = s[i+len(start):]
	if j := strings.Index(s, end); j >= 0 {
		s = s[:j]
	}
	return s
}
