package charttest

import (
	"fmt"
	"net"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/leashd/leash/testkit/envoycheck"
)

const sidecarDir = "../../sidecar"

// sidecarScenario is the chart in sidecar mode as deploy/sidecar documents it.
func sidecarScenario(t *testing.T) scenario {
	t.Helper()
	for _, s := range scenarios {
		if s.name == "sidecar" {
			return s
		}
	}
	t.Fatal("no sidecar scenario")
	return scenario{}
}

// podOf decodes a container and volumes, given as YAML, strictly as a Pod.
func podOf(t *testing.T, container any, volumes any) (corev1.PodSpec, corev1.Container) {
	t.Helper()
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "app"},
		"spec": map[string]any{"containers": []any{container}, "volumes": volumes},
	}
	b, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := decodeAll(string(b))
	if err != nil {
		t.Fatalf("the container and volumes do not decode strictly: %v", err)
	}
	p := only[*corev1.Pod](t, ms)
	return p.Spec, p.Spec.Containers[0]
}

func parseYAML(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%v:\n%s", err, text)
	}
	return v
}

// checkSidecarListeners: /v1 and gRPC on loopback only, admin on every address (the
// kubelet probes the pod IP).
func checkSidecarListeners(t *testing.T, l loaded) {
	t.Helper()
	for name, addr := range map[string]string{"http.addr": l.cfg.HTTP.Addr, "grpc.addr": l.cfg.GRPC.Addr} {
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			t.Errorf("%s %s: a sidecar listens on loopback only", name, addr)
		}
	}
}

// TestSidecarNotes: in sidecar mode the chart renders only config, and its notes give a
// container and volumes that, added to a pod, run Leash on the rendered config.
func TestSidecarNotes(t *testing.T) {
	s := sidecarScenario(t)
	r := render(t, s)
	notes := renderNotes(t, s.release, s.namespace, s.v)
	pod, c := notesPod(t, notes)
	l := loadContainerConfig(t, pod, c, r.ms)
	checkContainer(t, c, l)
	checkSidecarListeners(t, l)
	if l.envoy == nil {
		t.Error("the example's descriptor files are not loaded")
	}
	for _, want := range []string{"http://127.0.0.1:18080/v1", "127.0.0.1:18081", "counts on its own"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q", want)
		}
	}
}

// TestSidecarAppKey: the sidecar notes tell how the app gets its API key. With keys in
// secret.apiKeys they print the app's environment, and its LEASH_API_KEY, read from the
// chart's Secret, is a key of the account; with digests only, or the user's own Secret,
// they say where the key comes from.
func TestSidecarAppKey(t *testing.T) {
	s := sidecarScenario(t)
	r := render(t, s)
	notes := renderNotes(t, s.release, s.namespace, s.v)
	l := sidecarConfig(t)
	var env []corev1.EnvVar
	if err := yaml.UnmarshalStrict([]byte(between(t, notes, "# --- app env ---", "# --- end ---")), &env); err != nil {
		t.Fatalf("the app's env in the notes: %v", err)
	}
	checkAppReachesLeash(t, env, l)
	var key *corev1.EnvVar
	for i := range env {
		if env[i].Name == "LEASH_API_KEY" {
			key = &env[i]
		}
	}
	if key == nil || key.ValueFrom == nil || key.ValueFrom.SecretKeyRef == nil || key.Value != "" {
		t.Fatalf("LEASH_API_KEY is not read from a Secret: %+v", key)
	}
	ref := key.ValueFrom.SecretKeyRef
	sec := findByName[*corev1.Secret](r.ms, ref.Name)
	if sec == nil {
		t.Fatalf("LEASH_API_KEY: the release has no Secret %q", ref.Name)
	}
	v, ok := sec.Data[ref.Key]
	if !ok {
		t.Fatalf("LEASH_API_KEY: Secret %s has no key %q (keys %v)", ref.Name, ref.Key, sortedKeys(sec.Data))
	}
	if a, ok := l.direct.Lookup(string(v)); !ok || a.ID != "orders" {
		t.Errorf("LEASH_API_KEY (Secret %s key %s) is not a key of account orders", ref.Name, ref.Key)
	}

	digests := values{set: []string{"mode=sidecar", "config.accounts[0].id=acme", "config.accounts[0].plan=pro",
		"config.accounts[0].api_key_sha256[0]=" + strings.Repeat("ab", 32)}}
	for _, tc := range []struct {
		name string
		v    values
		want []string
	}{
		{"digests only", digests, []string{"LEASH_API_KEY", "leash keys new", "a Secret of your own"}},
		{"your own Secret", values{set: []string{"mode=sidecar", "secret.existingSecret=mine"}},
			[]string{"LEASH_API_KEY", "your Secret mine"}},
	} {
		notes := renderNotes(t, "leash", "shop", tc.v)
		for _, w := range tc.want {
			if !strings.Contains(notes, w) {
				t.Errorf("%s: notes lack %q:\n%s", tc.name, w, notes)
			}
		}
		if strings.Contains(notes, "# --- app env ---") {
			t.Errorf("%s: notes print an env for a key the chart does not hold:\n%s", tc.name, notes)
		}
	}
}

// TestSidecarAppChartValues: the values snippet for app charts is the container and
// volumes the chart's notes print for the same release, and the app is told Leash's URL.
func TestSidecarAppChartValues(t *testing.T) {
	s := sidecarScenario(t)
	r := render(t, s)
	b, err := os.ReadFile(sidecarDir + "/app-chart-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var snippet struct {
		Sidecars     []any           `json:"sidecars"`
		ExtraVolumes []any           `json:"extraVolumes"`
		ExtraEnvVars []corev1.EnvVar `json:"extraEnvVars"`
	}
	if err := yaml.UnmarshalStrict(b, &snippet); err != nil {
		t.Fatal(err)
	}
	if len(snippet.Sidecars) != 1 {
		t.Fatalf("want one sidecar, got %d", len(snippet.Sidecars))
	}
	pod, c := podOf(t, snippet.Sidecars[0], snippet.ExtraVolumes)
	l := loadContainerConfig(t, pod, c, r.ms)
	checkContainer(t, c, l)
	checkSidecarListeners(t, l)

	notes := renderNotes(t, s.release, s.namespace, s.v)
	npod, nc := notesPod(t, notes)
	if !reflect.DeepEqual(c, nc) {
		t.Errorf("the snippet's container differs from the one the notes print:\nsnippet %+v\nnotes   %+v", c, nc)
	}
	if !reflect.DeepEqual(pod.Volumes, npod.Volumes) {
		t.Errorf("the snippet's volumes differ from the notes':\nsnippet %+v\nnotes   %+v", pod.Volumes, npod.Volumes)
	}
	checkAppReachesLeash(t, snippet.ExtraEnvVars, l)
}

// checkAppReachesLeash: the app's LEASH_URL is Leash's /v1 listener.
func checkAppReachesLeash(t *testing.T, env []corev1.EnvVar, l loaded) {
	t.Helper()
	for _, e := range env {
		if e.Name == "LEASH_URL" {
			if want := fmt.Sprintf("http://%s", l.cfg.HTTP.Addr); e.Value != want {
				t.Errorf("LEASH_URL %s, Leash listens on %s", e.Value, want)
			}
			return
		}
	}
	t.Error("the app is not given LEASH_URL")
}

// TestSidecarManifest: the plain manifest's pod runs the app and Leash, Leash loads its
// ConfigMap, and the documented example key is an account's.
func TestSidecarManifest(t *testing.T) {
	b, err := os.ReadFile(sidecarDir + "/app-with-leash.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := decodeAll(string(b))
	if err != nil {
		t.Fatal(err)
	}
	dep := only[*appsv1.Deployment](t, ms)
	pod := dep.Spec.Template.Spec
	c := leashContainer(t, pod)
	l := loadContainerConfig(t, pod, c, ms)
	checkContainer(t, c, l)
	checkSidecarListeners(t, l)
	if a, ok := l.direct.Lookup("example-key-orders"); !ok || a.ID != "orders" {
		t.Error(`the key in the manifest's comment is not account "orders"'s`)
	}
	var app *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == "app" {
			app = &pod.Containers[i]
		}
	}
	if app == nil {
		t.Fatal("no app container")
	}
	checkAppReachesLeash(t, app.Env, l)
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= int64(l.cfg.Shutdown.Timeout.Seconds()) {
		t.Errorf("terminationGracePeriodSeconds %v is not above shutdown.timeout %s", g, l.cfg.Shutdown.Timeout)
	}
}

// TestSidecarEnvoyCluster: the Envoy cluster in deploy/sidecar/README.md is valid Envoy v3
// configuration (unknown fields fail) and points at the sidecar's gRPC listener.
func TestSidecarEnvoyCluster(t *testing.T) {
	b, err := os.ReadFile(sidecarDir + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "## An Envoy in the pod")
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("no yaml block in the README's Envoy section")
	}
	var doc struct {
		Clusters []any `json:"clusters"`
	}
	if err := yaml.UnmarshalStrict([]byte(m[1]), &doc); err != nil || len(doc.Clusters) != 1 {
		t.Fatalf("want one cluster: %v", err)
	}
	var c clusterv3.Cluster
	if err := envoycheck.Unmarshal(doc.Clusters[0], &c); err != nil {
		t.Fatalf("not an Envoy v3 Cluster: %v", err)
	}
	// Validate, unlike ValidateAll, also checks inside typed_extension_protocol_options.
	if err := envoycheck.Validate(&c); err != nil {
		t.Fatalf("invalid Envoy Cluster: %v", err)
	}
	l := sidecarConfig(t)
	addr := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if got, want := net.JoinHostPort(addr.GetAddress(), fmt.Sprint(addr.GetPortValue())), l.cfg.GRPC.Addr; got != want {
		t.Errorf("the cluster points at %s, the sidecar's gRPC listener is %s", got, want)
	}
	if len(c.GetTypedExtensionProtocolOptions()) == 0 {
		t.Error("no HTTP/2 protocol options: gRPC needs HTTP/2")
	}
}

// sidecarConfig loads the config of the chart's sidecar container (from its notes).
func sidecarConfig(t *testing.T) loaded {
	t.Helper()
	s := sidecarScenario(t)
	r := render(t, s)
	pod, c := notesPod(t, renderNotes(t, s.release, s.namespace, s.v))
	return loadContainerConfig(t, pod, c, r.ms)
}

// notesPod is the pod the sidecar-mode notes describe: their container and volumes.
func notesPod(t *testing.T, notes string) (corev1.PodSpec, corev1.Container) {
	t.Helper()
	return podOf(t, parseYAML(t, between(t, notes, "# --- leash sidecar container ---", "# --- end ---")),
		parseYAML(t, between(t, notes, "# --- leash sidecar volumes ---", "# --- end ---")))
}
