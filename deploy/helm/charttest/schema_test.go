package charttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/leashd/leash/config"
)

// schemaNode is the part of JSON Schema that values.schema.json uses for config.
type schemaNode struct {
	Ref                  string                 `json:"$ref"`
	Type                 any                    `json:"type"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties json.RawMessage        `json:"additionalProperties"`
	Items                *schemaNode            `json:"items"`
	Enum                 []any                  `json:"enum"`
	Pattern              string                 `json:"pattern"`
	Minimum              *float64               `json:"minimum"`
	Required             []string               `json:"required"`
}

type chartSchema struct {
	schemaNode
	Definitions map[string]*schemaNode `json:"definitions"`
}

func readSchema(t *testing.T) *chartSchema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s chartSchema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func (s *chartSchema) resolve(n *schemaNode) *schemaNode {
	for n != nil && n.Ref != "" {
		n = s.Definitions[strings.TrimPrefix(n.Ref, "#/definitions/")]
	}
	return n
}

// mapPlaceholders names one key of each free-form map of the config.
var mapPlaceholders = map[string]string{"plans": "pro", "envoy.domains": "edge"}

// leaf is one config key the schema admits, with a sample value of its type.
type leaf struct {
	path   string // "store.redis.url", "accounts[].plan", "plans.pro.hard_cap"
	sample any
}

// leaves walks the schema of config to its leaves.
func (s *chartSchema) leaves(path string, n *schemaNode, refName string, out *[]leaf) {
	n0 := n
	n = s.resolve(n)
	if len(n.Properties) > 0 {
		for _, k := range sortedKeys(n.Properties) {
			s.leaves(join(path, k), n.Properties[k], "", out)
		}
		return
	}
	if ph, ok := mapPlaceholders[path]; ok {
		var elem schemaNode
		if err := json.Unmarshal(n.AdditionalProperties, &elem); err != nil {
			panic(path + ": " + err.Error())
		}
		s.leaves(join(path, ph), &elem, "", out)
		return
	}
	if it := s.resolve(n.Items); it != nil && len(it.Properties) > 0 {
		s.leaves(path+"[]", it, "", out)
		return
	}
	if n0.Ref != "" {
		refName = strings.TrimPrefix(n0.Ref, "#/definitions/")
	}
	*out = append(*out, leaf{path, s.sample(n, refName)})
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// sample returns a value of the node's type that Leash's loader reads as that type.
func (s *chartSchema) sample(n *schemaNode, refName string) any {
	switch {
	case refName == "duration":
		return "1s"
	case refName == "hostPort":
		return "redis-0:6379"
	case len(n.Enum) > 0:
		return n.Enum[0]
	case strings.HasPrefix(n.Pattern, "^rediss?://"):
		return "redis://redis:6379/0"
	case strings.Contains(n.Pattern, "{64}"):
		return strings.Repeat("ab", 32)
	}
	typ, _ := n.Type.(string)
	if l, ok := n.Type.([]any); ok {
		typ, _ = l[0].(string)
	}
	switch typ {
	case "string":
		return "x"
	case "integer":
		if n.Minimum != nil && *n.Minimum > 1 {
			return int64(*n.Minimum)
		}
		return 1
	case "boolean":
		return true
	case "number":
		return 0.5
	case "array":
		it := s.resolve(n.Items)
		name := ""
		if n.Items != nil {
			name = strings.TrimPrefix(n.Items.Ref, "#/definitions/")
		}
		return []any{s.sample(it, name)}
	}
	panic("no sample for a schema node of type " + typ)
}

// doc builds a config file setting one key; an account gets the required id and plan, an
// operator its id.
func (l leaf) doc() map[string]any {
	root := map[string]any{}
	parts := strings.Split(l.path, ".")
	cur := root
	for i, p := range parts {
		last := i == len(parts)-1
		if name, ok := strings.CutSuffix(p, "[]"); ok {
			item := map[string]any{"id": "acme", "plan": "pro"}
			if name == "operators" {
				item = map[string]any{"id": "ops"}
			}
			cur[name] = []any{item}
			cur = item
			continue
		}
		if last {
			cur[p] = l.sample
			break
		}
		next := map[string]any{}
		cur[p] = next
		cur = next
	}
	return root
}

// TestSchemaKeysAreLeashKeys: every config key values.schema.json admits is one Leash's
// loader knows, with the same type, so a value the schema lets through is not refused
// by the pod at start-up.
func TestSchemaKeysAreLeashKeys(t *testing.T) {
	s := readSchema(t)
	var ls []leaf
	s.leaves("", s.Properties["config"], "", &ls)
	if len(ls) < 30 {
		t.Fatalf("found only %d config keys in the schema", len(ls))
	}
	for _, l := range ls {
		t.Run(l.path, func(t *testing.T) {
			b, err := yaml.Marshal(l.doc())
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "leash.yaml")
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = config.Load([]string{file}, nil)
			if err != nil && (strings.Contains(err.Error(), "unknown key") || strings.Contains(err.Error(), "expected")) {
				t.Errorf("the schema admits %s (sample %v), Leash's loader does not:\n%v\n%s", l.path, l.sample, err, b)
			}
		})
	}
}

// TestLeashKeysInSchema: every key of config/example.yaml is in the schema, except the
// ones the chart sets itself and the secret ones, which have their own values.
func TestLeashKeysInSchema(t *testing.T) {
	s := readSchema(t)
	var ls []leaf
	s.leaves("", s.Properties["config"], "", &ls)
	inSchema := map[string]bool{}
	for _, l := range ls {
		inSchema[l.path] = true
	}
	var example map[string]any
	if err := yaml.Unmarshal([]byte(config.Example()), &example); err != nil {
		t.Fatal(err)
	}
	notInSchema := []string{"http.addr", "grpc.addr", "admin.addr", "store.disk.path", "store.redis.password", "accounts[].api_keys", "operators[].api_keys"}
	check := func(path string) {
		if inSchema[path] == slices.Contains(notInSchema, path) {
			t.Errorf("config key %s: in the schema = %v, want %v", path, inSchema[path], !inSchema[path])
		}
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if ph, ok := mapPlaceholders[path]; ok {
				for _, elem := range x {
					walk(join(path, ph), elem)
				}
				return
			}
			for k, e := range x {
				walk(join(path, k), e)
			}
		case []any:
			if len(x) > 0 {
				if _, ok := x[0].(map[string]any); ok {
					walk(path+"[]", x[0])
					return
				}
			}
			check(path)
		default:
			check(path)
		}
	}
	walk("", example)
}

// TestSchemaHostPorts: Redis addresses the schema takes are those Leash's loader takes,
// IPv6 hosts in brackets included.
func TestSchemaHostPorts(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"redis-0.redis:6379", true},
		{"10.0.0.7:6379", true},
		{"[fd00::1]:6379", true},
		{"redis-0", false},
		{"fd00::1:6379", false},
		{"[fd00::1]", false},
		{"redis 0:6379", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, "x", "default", values{set: []string{
				"config.store.backend=redis", "config.store.redis.cluster_addrs[0]=" + tc.addr}})
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "cluster_addrs")) {
				t.Fatalf("not refused by the schema: %v", err)
			}
		})
	}
}
