package httpapi_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/leashd/leash/httpapi"
	"go.yaml.in/yaml/v3"
)

const openAPIPath = "../docs/openapi.yaml"

// TestOpenAPIMatchesRoutes checks docs/openapi.yaml against the route table the router is
// built from: every served (method, path) is documented and every documented one is
// served. It also checks that every $ref resolves, every operation documents 401 and
// 500, and every error response uses the Error schema.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	raw, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIPath, err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("openapi version %q, want 3.1.x", v)
	}
	scheme := dig(doc, "components", "securitySchemes", "bearerAuth")
	if scheme == nil || scheme.(map[string]any)["scheme"] != "bearer" {
		t.Fatal("no bearer security scheme bearerAuth")
	}

	served := map[string]bool{}
	for _, r := range httpapi.Routes() {
		served[r.Method+" "+r.Path] = true
	}
	documented := map[string]bool{}
	paths, _ := doc["paths"].(map[string]any)
	methods := []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}
	for path, item := range paths {
		for m, op := range item.(map[string]any) {
			if !slices.Contains(methods, m) {
				continue
			}
			key := strings.ToUpper(m) + " " + path
			documented[key] = true
			checkOperation(t, doc, key, op.(map[string]any))
		}
	}
	for k := range served {
		if !documented[k] {
			t.Errorf("%s is served but not in %s", k, openAPIPath)
		}
	}
	for k := range documented {
		if !served[k] {
			t.Errorf("%s is in %s but not served", k, openAPIPath)
		}
	}
	checkRefs(t, doc, doc)
}

func checkOperation(t *testing.T, doc map[string]any, key string, op map[string]any) {
	t.Helper()
	responses, _ := op["responses"].(map[string]any)
	for _, code := range []string{"401", "500"} {
		if responses[code] == nil {
			t.Errorf("%s: no %s response", key, code)
		}
	}
	for code, r := range responses {
		resp := resolve(doc, r.(map[string]any))
		if dig(resp, "headers", "X-Request-Id") == nil {
			t.Errorf("%s %s: no X-Request-Id header", key, code)
		}
		if code[0] != '4' && code[0] != '5' {
			continue
		}
		schema := dig(resp, "content", "application/json", "schema")
		if s, ok := schema.(map[string]any); !ok || s["$ref"] != "#/components/schemas/Error" {
			t.Errorf("%s %s: error response without the Error schema", key, code)
		}
	}
}

// dig walks nested maps by keys; nil when a key is missing.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// resolve follows a local $ref.
func resolve(doc map[string]any, v map[string]any) map[string]any {
	for {
		ref, ok := v["$ref"].(string)
		if !ok {
			return v
		}
		target, _ := dig(doc, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...).(map[string]any)
		if target == nil {
			return v
		}
		v = target
	}
}

// checkRefs fails on any $ref that does not resolve within the document.
func checkRefs(t *testing.T, doc map[string]any, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			if !strings.HasPrefix(ref, "#/") || dig(doc, strings.Split(ref[2:], "/")...) == nil {
				t.Errorf("unresolved $ref %q", ref)
			}
		}
		for _, x := range v {
			checkRefs(t, doc, x)
		}
	case []any:
		for _, x := range v {
			checkRefs(t, doc, x)
		}
	}
}
