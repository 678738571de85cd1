package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/leashd/leash/config"
)

const istioDir = "../../../examples/istio"

// readObjects reads a file of Kubernetes objects as plain maps (EnvoyFilter is not a
// type of this package's scheme; examples/istio validates it against Envoy's types).
func readObjects(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, doc := range docSep.Split(string(b), -1) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

func str(v any, path ...any) string {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return ""
			}
			v = l[k]
		}
	}
	s, _ := v.(string)
	return s
}

// TestIstioExampleWithChart: installed with values-istio.yaml, the chart makes the
// Service the Istio example's EnvoyFilter points at, with the example's descriptors and
// the same accounts and domain mapping as the example's own Leash config.
func TestIstioExampleWithChart(t *testing.T) {
	var s scenario
	for _, sc := range scenarios {
		if sc.name == "istio" {
			s = sc
		}
	}
	r := render(t, s)
	svc := only[*corev1.Service](t, r.ms)
	dep := only[*appsv1.Deployment](t, r.ms)
	l := loadContainerConfig(t, dep.Spec.Template.Spec, leashContainer(t, dep.Spec.Template.Spec), r.ms)

	// The EnvoyFilter's cluster is the one Istio builds for the Service's gRPC port.
	filters := readObjects(t, filepath.Join(istioDir, "envoyfilter-ratelimit.yaml"))
	eg := func(key string) string {
		return str(filters[0], "spec", "configPatches", 0, "patch", "value", "typed_config",
			"rate_limit_service", "grpc_service", "envoy_grpc", key)
	}
	var grpcPort int32
	for _, p := range svc.Spec.Ports {
		if p.Name == "grpc" && p.AppProtocol != nil && *p.AppProtocol == "grpc" {
			grpcPort = p.Port
		}
	}
	fqdn := fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, svc.Namespace)
	if want := fmt.Sprintf("outbound|%d||%s", grpcPort, fqdn); eg("cluster_name") != want {
		t.Errorf("the EnvoyFilter's cluster %q, the chart's Service makes %q", eg("cluster_name"), want)
	}
	if eg("authority") != fqdn {
		t.Errorf("the EnvoyFilter's authority %q, the chart's Service is %q", eg("authority"), fqdn)
	}

	// The descriptors are the example ConfigMap's, unchanged.
	var exampleDescriptors string
	for _, o := range readObjects(t, filepath.Join(istioDir, "ratelimit-configmap.yaml")) {
		exampleDescriptors = str(o, "data", "config.yaml")
	}
	files := 0
	for path, b := range l.files {
		if filepath.Dir(path) == "/etc/leash/ratelimit" {
			files++
			if string(b) != exampleDescriptors {
				t.Errorf("%s differs from data.config.yaml of examples/istio/ratelimit-configmap.yaml", path)
			}
		}
	}
	if files != 1 || l.envoy == nil {
		t.Fatalf("want the one descriptor file of the example, mounted and loaded (files %d)", files)
	}
	domain := str(filters[0], "spec", "configPatches", 0, "patch", "value", "typed_config", "domain")
	if got := l.envoy.Domains(); len(got) != 1 || got[0] != domain {
		t.Errorf("descriptor domains %v, the EnvoyFilter asks for %q", got, domain)
	}

	// The same accounts and routing as examples/istio/leash.yaml.
	var exampleConfig string
	for _, o := range readObjects(t, filepath.Join(istioDir, "leash.yaml")) {
		if o["kind"] == "ConfigMap" && str(o, "metadata", "name") == "leash-config" {
			exampleConfig = str(o, "data", "leash.yaml")
		}
	}
	file := filepath.Join(t.TempDir(), "leash.yaml")
	if err := os.WriteFile(file, []byte(exampleConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := config.Load([]string{file}, nil)
	if err != nil {
		t.Fatalf("examples/istio/leash.yaml: %v", err)
	}
	if !reflect.DeepEqual(l.cfg.Accounts, want.Accounts) || !reflect.DeepEqual(l.cfg.Envoy.Domains, want.Envoy.Domains) ||
		l.cfg.Store.Backend != want.Store.Backend {
		t.Errorf("the chart's config differs from examples/istio/leash.yaml:\nchart   %+v %+v %s\nexample %+v %+v %s",
			l.cfg.Accounts, l.cfg.Envoy.Domains, l.cfg.Store.Backend, want.Accounts, want.Envoy.Domains, want.Store.Backend)
	}
}
