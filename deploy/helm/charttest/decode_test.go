package charttest

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// scheme knows every kind the chart and the examples may render. ServiceMonitor, a CRD,
// is decoded into the Prometheus Operator's own Go types
// (github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring), so it is
// checked as strictly as the built-in kinds.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		autoscalingv2.AddToScheme, networkingv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}()

// strict decodes YAML into the scheme's types; unknown and duplicate fields are errors.
var strict = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
	json.SerializerOptions{Yaml: true, Strict: true})

// manifest is one rendered document and what it decoded into.
type manifest struct {
	source string // "# Source:" line helm writes, for messages
	text   string
	obj    runtime.Object
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decodeAll splits a multi-document YAML stream and decodes each non-empty document
// strictly. Any document that is not a known kind, or has a field its type lacks, fails.
func decodeAll(stream string) ([]manifest, error) {
	var out []manifest
	for _, doc := range docSep.Split(stream, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		m := manifest{text: doc, source: sourceOf(doc)}
		obj, gvk, err := strict.Decode([]byte(doc), nil, nil)
		if err != nil { // a strict error comes with an object: it is still a failure
			return nil, fmt.Errorf("%s: %v", m.source, err)
		}
		if gvk == nil || gvk.Kind == "" {
			return nil, fmt.Errorf("%s: no kind", m.source)
		}
		m.obj = obj
		out = append(out, m)
	}
	return out, nil
}

func stripComments(doc string) string {
	var b bytes.Buffer
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func sourceOf(doc string) string {
	for _, line := range strings.Split(doc, "\n") {
		if s, ok := strings.CutPrefix(line, "# Source: "); ok {
			return s
		}
	}
	return "document"
}

// objectsOf returns the decoded objects of type T.
func objectsOf[T runtime.Object](ms []manifest) []T {
	var out []T
	for _, m := range ms {
		if o, ok := m.obj.(T); ok {
			out = append(out, o)
		}
	}
	return out
}

// only returns the one object of type T, failing the test when there is not exactly one.
func only[T runtime.Object](t *testing.T, ms []manifest) T {
	t.Helper()
	objs := objectsOf[T](ms)
	if len(objs) != 1 {
		var zero T
		t.Fatalf("want exactly one %T, rendered %d", zero, len(objs))
	}
	return objs[0]
}

// kinds lists the rendered kinds, "Kind/name", in order.
func kinds(ms []manifest) []string {
	var out []string
	for _, m := range ms {
		gvk := m.obj.GetObjectKind().GroupVersionKind()
		name := ""
		if o, ok := m.obj.(interface{ GetName() string }); ok {
			name = o.GetName()
		}
		out = append(out, gvk.Kind+"/"+name)
	}
	return out
}

// TestStrictDecodingRejects proves the decoder fails on what it must.
func TestStrictDecodingRejects(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"unknown field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndatta: {}\n", `unknown field "datta"`},
		{"misplaced field", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: 1\n  containers: []\n", `unknown field "spec.containers"`},
		{"duplicate field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {}\ndata: {}\n", "already set"},
		{"wrong type", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  ports: [{port: http}]\n", "port"},
		{"unknown kind", "apiVersion: v1\nkind: Servise\nmetadata: {name: x}\n", "no kind"},
		{"ServiceMonitor field", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec:\n  selector: {}\n  endpoint: []\n", `unknown field "spec.endpoint"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeAll(tc.doc)
			if err == nil {
				t.Fatal("decoded without error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
