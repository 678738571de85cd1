package rls_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leashd/leash/config"
	"github.com/leashd/leash/testkit"
)

// migrationTable returns the rows of the migration table in a document: the first table
// after heading, as (peer variables, Leash keys) per row.
func migrationTable(t *testing.T, path, heading string) [][2][]string {
	t.Helper()
	code := regexp.MustCompile("`([^`]+)`")
	var rows [][2][]string
	for _, line := range testkit.TableRows(t, path, heading, "| the peer's variable |") {
		cells := strings.Split(line, "|")
		var row [2][]string
		for c := 0; c < 2; c++ {
			for _, m := range code.FindAllStringSubmatch(cells[c+1], -1) {
				row[c] = append(row[c], m[1])
			}
		}
		rows = append(rows, row)
	}
	if len(rows) < 40 {
		t.Fatalf("%s: only %d rows in the migration table", path, len(rows))
	}
	return rows
}

// The migration table of spec §9.17 and docs/envoy.md are the same, name each of the
// peer's variables (src/settings/settings.go) once, and name only keys Leash has.
func TestMigrationTable(t *testing.T) {
	spec := migrationTable(t, "../../docs/spec.md", "### §9.17 ")
	doc := migrationTable(t, "../../docs/envoy.md", "## Migrating from envoyproxy/ratelimit")
	if !slices.EqualFunc(spec, doc, func(a, b [2][]string) bool { return slices.Equal(a[0], b[0]) && slices.Equal(a[1], b[1]) }) {
		t.Error("the migration tables of docs/spec.md §9.17 and docs/envoy.md differ")
	}
	seen := map[string]bool{}
	for _, row := range spec {
		for _, v := range row[0] {
			if !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(v) {
				t.Errorf("%q is not an environment variable name", v)
			}
			if seen[v] {
				t.Errorf("%s is listed twice", v)
			}
			seen[v] = true
		}
		last := ""
		for _, k := range row[1] {
			// "envoy.header_names.limit", ".remaining": relative to the previous key's parent;
			// "envoy.xds.tls.*": any key below.
			if !strings.Contains(k, ".") || strings.ToLower(k) != k {
				continue // a value of the peer's variable (FILE, SINGLE ...)
			}
			if strings.HasPrefix(k, ".") {
				k = last[:strings.LastIndex(last, ".")] + k
			}
			last = k
			if strings.HasSuffix(k, ".*") {
				continue
			}
			env := "LEASH_" + strings.ToUpper(strings.ReplaceAll(k, ".", "_")) + "=x"
			if _, err := config.Load(nil, []string{env}); err != nil && strings.Contains(err.Error(), "names no config key") {
				t.Errorf("the table names %q, which is not a Leash key", k)
			}
		}
	}
	// A sample of the peer's variables that must be there.
	for _, v := range []string{"CONFIG_TYPE", "RUNTIME_ROOT", "REDIS_URL", "LOCAL_CACHE_SIZE_IN_BYTES", "SHADOW_MODE",
		"CONFIG_GRPC_XDS_SERVER_URL", "LIMIT_RESPONSE_HEADERS_ENABLED", "USE_STATSD", "MEMCACHE_HOST_PORT", "TRACING_SAMPLING_RATE"} {
		if !seen[v] {
			t.Errorf("%s is missing from the migration table", v)
		}
	}
}
