package charttest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// scenario is one way of installing the chart.
type scenario struct {
	name      string
	release   string
	namespace string
	v         values
	existing  []string // manifests the user applies first (e.g. the existing Secret)
	want      []string // rendered Kind/name, sorted
}

func (s scenario) String() string { return s.name }

var scenarios = []scenario{
	{name: "default", release: "leash", namespace: "leash",
		want: []string{"ConfigMap/leash", "Deployment/leash", "Pod/leash-test-readyz",
			"PodDisruptionBudget/leash", "Service/leash", "ServiceAccount/leash"}},
	{name: "shared on redis", release: "edge", namespace: "rl",
		v: values{files: []string{examplesDir + "/values-redis.yaml"}},
		want: []string{"ConfigMap/edge-leash", "ConfigMap/edge-leash-descriptors", "Deployment/edge-leash",
			"Pod/edge-leash-test-readyz", "PodDisruptionBudget/edge-leash", "Service/edge-leash", "ServiceAccount/edge-leash"}},
	{name: "HPA, ServiceMonitor, dashboard, alerts and NetworkPolicy", release: "leash", namespace: "leash",
		v: values{files: []string{examplesDir + "/values-redis-cluster.yaml"}},
		want: []string{"ConfigMap/leash", "ConfigMap/leash-dashboard", "Deployment/leash", "HorizontalPodAutoscaler/leash", "NetworkPolicy/leash",
			"Pod/leash-test-readyz", "PodDisruptionBudget/leash", "PrometheusRule/leash", "Service/leash", "ServiceAccount/leash", "ServiceMonitor/leash"}},
	{name: "chart-made secret", release: "leash", namespace: "leash",
		v: values{files: []string{examplesDir + "/values-redis-sentinel.yaml"}},
		want: []string{"ConfigMap/leash", "Deployment/leash", "Pod/leash-test-readyz",
			"PodDisruptionBudget/leash", "Secret/leash", "Service/leash", "ServiceAccount/leash"}},
	{name: "existing secret", release: "leash", namespace: "leash",
		v:        values{files: []string{examplesDir + "/values-existing-secret.yaml"}},
		existing: []string{examplesDir + "/secret-leash.yaml"},
		want: []string{"ConfigMap/leash", "Deployment/leash", "Pod/leash-test-readyz",
			"PodDisruptionBudget/leash", "Service/leash", "ServiceAccount/leash"}},
	{name: "istio", release: "leash", namespace: "leash",
		v: values{files: []string{examplesDir + "/values-istio.yaml"}},
		want: []string{"ConfigMap/leash", "ConfigMap/leash-descriptors", "Deployment/leash", "Pod/leash-test-readyz",
			"PodDisruptionBudget/leash", "Service/leash", "ServiceAccount/leash"}},
	{name: "one replica on the disk store", release: "leash", namespace: "leash",
		v: values{files: []string{examplesDir + "/values-disk.yaml"}},
		want: []string{"ConfigMap/leash", "Pod/leash-test-readyz", "PodDisruptionBudget/leash", "Service/leash",
			"ServiceAccount/leash", "StatefulSet/leash"}},
	{name: "sidecar", release: "orders-leash", namespace: "shop",
		v:    values{files: []string{examplesDir + "/values-sidecar.yaml"}},
		want: []string{"ConfigMap/orders-leash", "ConfigMap/orders-leash-descriptors", "Secret/orders-leash"}},
	{name: "dashboard and alerts", release: "leash", namespace: "leash",
		v: values{set: []string{"metrics.dashboard.enabled=true", "metrics.prometheusRule.enabled=true",
			"metrics.dashboard.annotations.grafana_folder=Leash", "metrics.prometheusRule.labels.release=kube-prometheus-stack"}},
		want: []string{"ConfigMap/leash", "ConfigMap/leash-dashboard", "Deployment/leash", "Pod/leash-test-readyz",
			"PodDisruptionBudget/leash", "PrometheusRule/leash", "Service/leash", "ServiceAccount/leash"}},
	{name: "service, redis URL and password from secrets", release: "leash", namespace: "leash",
		v: values{set: []string{"config.store.backend=redis", "replicaCount=2",
			"config.accounts[0].id=acme", "config.accounts[0].plan=free",
			"redisSecretRef.password.name=redis", "redisSecretRef.url.name=redis", "redisSecretRef.url.key=url",
			"secret.redis.password=pw-from-values", "secret.apiKeys.acme[0]=key-from-values"}},
		want: []string{"ConfigMap/leash", "Deployment/leash", "Pod/leash-test-readyz",
			"PodDisruptionBudget/leash", "Secret/leash", "Service/leash", "ServiceAccount/leash"}},
}

// rendered is one scenario's output.
type rendered struct {
	scenario
	ms       []manifest // rendered
	existing []manifest // applied by the user beforehand
}

func (r rendered) all() []manifest { return append(slices.Clone(r.ms), r.existing...) }

func render(t *testing.T, s scenario) rendered {
	t.Helper()
	out, err := template(t, s.release, s.namespace, s.v)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := decodeAll(out)
	if err != nil {
		t.Fatalf("rendered manifests do not decode strictly: %v", err)
	}
	r := rendered{scenario: s, ms: ms}
	for _, f := range s.existing {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ems, err := decodeAll(string(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		r.existing = append(r.existing, ems...)
	}
	return r
}

// TestEveryExampleHasAScenario keeps new example values files under test.
func TestEveryExampleHasAScenario(t *testing.T) {
	covered := map[string]bool{}
	for _, s := range scenarios {
		for _, f := range s.v.files {
			covered[filepath.Clean(f)] = true
		}
	}
	for _, f := range exampleValues(t) {
		if !covered[filepath.Clean(f)] {
			t.Errorf("%s is used by no scenario in render_test.go", f)
		}
	}
}

func TestRender(t *testing.T) {
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			r := render(t, s)
			got := kinds(r.ms)
			slices.Sort(got)
			if !slices.Equal(got, s.want) {
				t.Errorf("rendered %v\nwant     %v", got, s.want)
			}
			for _, m := range r.ms {
				if o, ok := m.obj.(metav1.Object); ok && o.GetNamespace() != s.namespace && !isServiceMonitor(m) {
					t.Errorf("%s %s: namespace %q, want the release's %q", m.source, o.GetName(), o.GetNamespace(), s.namespace)
				}
			}
			checkSecretsOutOfConfigMaps(t, r)
			checkDashboardAndRules(t, r)
			if len(objectsOf[*appsv1.Deployment](r.ms)) == 0 {
				return // sidecar mode: TestSidecar* check the container
			}
			dep := only[*appsv1.Deployment](t, r.ms)
			l := loadContainerConfig(t, dep.Spec.Template.Spec, leashContainer(t, dep.Spec.Template.Spec), r.all())
			checkDeployment(t, r, dep, l)
			checkKeysReachLeash(t, r, l)
			checkDescriptorsLoaded(t, r, l)
			checkService(t, r, dep, l)
			checkScaling(t, r, dep, l)
			checkPolicies(t, r, dep)
			checkHelmTest(t, r, dep)
		})
	}
}

func isServiceMonitor(m manifest) bool { _, ok := m.obj.(*monitoringv1.ServiceMonitor); return ok }

func leashContainer(t *testing.T, pod corev1.PodSpec) corev1.Container {
	t.Helper()
	for _, c := range pod.Containers {
		if c.Name == "leash" {
			return c
		}
	}
	t.Fatalf("no container named leash")
	return corev1.Container{}
}

// port returns the port number of a listen address such as ":8080" or "127.0.0.1:18080".
func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil || n == 0 {
		t.Fatalf("listen address %q: the port must be fixed for a container port", addr)
	}
	return int32(n)
}

// containerPort returns the named container port, failing when it is not declared.
func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
				t.Errorf("port %s: protocol %s", name, p.Protocol)
			}
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %q (ports %v)", c.Name, name, c.Ports)
	return 0
}

// resolvePort turns a probe's or Service's target port (number or name) into a number.
func resolvePort(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	return containerPort(t, c, p.StrVal)
}

// checkContainer checks the Leash container against the config it loads: the ports it
// declares are those the config listens on, the probes reach the admin listener's
// /healthz and /readyz, and its security context is locked down.
func checkContainer(t *testing.T, c corev1.Container, l loaded) {
	t.Helper()
	cfg := l.cfg
	for name, addr := range map[string]string{"http": cfg.HTTP.Addr, "grpc": cfg.GRPC.Addr, "admin": cfg.Admin.Addr} {
		if got, want := containerPort(t, c, name), port(t, addr); got != want {
			t.Errorf("container port %s = %d, the config listens on %s", name, got, addr)
		}
	}
	if len(c.Ports) != 3 {
		t.Errorf("container ports %v, want http, grpc and admin", c.Ports)
	}
	admin := port(t, cfg.Admin.Addr)
	if host, _, _ := net.SplitHostPort(cfg.Admin.Addr); host != "" {
		t.Errorf("admin.addr %s: the kubelet probes the pod IP, so admin must listen on every address", cfg.Admin.Addr)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe", p.name)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path {
			t.Errorf("%s path %q, want %q", p.name, g.Path, p.path)
		}
		if got := resolvePort(t, c, g.Port); got != admin {
			t.Errorf("%s port %v = %d, the admin listener is %s", p.name, g.Port.String(), got, cfg.Admin.Addr)
		}
		if g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP {
			t.Errorf("%s scheme %s: the admin listener is plain HTTP", p.name, g.Scheme)
		}
	}
	if len(c.Command) > 0 {
		t.Errorf("command %q: the image's entrypoint (leash serve) must run", c.Command)
	}
	checkContainerSecurity(t, c.SecurityContext)
	for _, vm := range c.VolumeMounts {
		if !vm.ReadOnly {
			t.Errorf("volumeMount %s is writable", vm.Name)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %v: want cpu and memory requests and a memory limit", c.Resources)
	}
}

func checkContainerSecurity(t *testing.T, sc *corev1.SecurityContext) {
	t.Helper()
	uid, gid := imageUser(t)
	switch {
	case sc == nil:
		t.Fatal("container has no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("securityContext.runAsNonRoot is not true")
	case sc.RunAsUser == nil || *sc.RunAsUser != uid:
		t.Errorf("securityContext.runAsUser %v, want the image's user %d", sc.RunAsUser, uid)
	case sc.RunAsGroup == nil || *sc.RunAsGroup != gid:
		t.Errorf("securityContext.runAsGroup %v, want the image's group %d", sc.RunAsGroup, gid)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("securityContext.readOnlyRootFilesystem is not true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("securityContext.allowPrivilegeEscalation is not false")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("securityContext.privileged")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("securityContext.capabilities %+v, want drop [ALL] and nothing added", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("securityContext.seccompProfile %+v, want RuntimeDefault", sc.SeccompProfile)
	}
}

func checkDeployment(t *testing.T, r rendered, dep *appsv1.Deployment, l loaded) {
	t.Helper()
	pod := dep.Spec.Template.Spec
	c := leashContainer(t, pod)
	checkContainer(t, c, l)
	if len(pod.Containers) != 1 || len(pod.InitContainers) > 0 {
		t.Errorf("pod has %d containers and %d init containers, want Leash alone", len(pod.Containers), len(pod.InitContainers))
	}
	if host, _, _ := net.SplitHostPort(l.cfg.HTTP.Addr); host != "" {
		t.Errorf("http.addr %s: a shared service listens on every address", l.cfg.HTTP.Addr)
	}
	if !strings.HasSuffix(c.Image, ":"+chartAppVersion(t)) {
		t.Errorf("image %s: want the chart's appVersion as the tag", c.Image)
	}

	// The config file is mounted where the args name it: the ConfigMap first, the
	// Secret's file (when any) after it, so secret values win.
	if got := l.paths[0]; got != "/etc/leash/config/leash.yaml" {
		t.Errorf("first --config %s, want the ConfigMap's /etc/leash/config/leash.yaml", got)
	}
	if len(l.paths) > 2 {
		t.Errorf("--config %v: want the ConfigMap's file and at most the Secret's", l.paths)
	}

	ps := pod.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.SeccompProfile == nil ||
		ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and seccomp RuntimeDefault", ps)
	}
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.DefaultMode != nil && *v.Secret.DefaultMode&0o004 == 0 {
			if ps == nil || ps.FSGroup == nil || *ps.FSGroup != *c.SecurityContext.RunAsGroup {
				t.Errorf("Secret volume %s has mode %o, readable only by its group, and the pod's fsGroup is not the container's group", v.Name, *v.Secret.DefaultMode)
			}
		}
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is not false: Leash never calls the API server")
	}
	grace := pod.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= l.cfg.Shutdown.Timeout {
		t.Errorf("terminationGracePeriodSeconds %v is not above shutdown.timeout %s", grace, l.cfg.Shutdown.Timeout)
	}
	if l.cfg.Shutdown.DrainDelay == 0 {
		t.Error("shutdown.drain_delay is 0: endpoints would still route to a closing pod")
	}

	// The selector selects the pods, and the config checksum is on the pod template.
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("selector %v does not select the pod labels %v (%v)", dep.Spec.Selector, dep.Spec.Template.Labels, err)
	}
	if len(dep.Spec.Template.Annotations["checksum/config"]) != 64 {
		t.Errorf("pod annotations %v: no checksum/config", dep.Spec.Template.Annotations)
	}
	if objectsOf[*corev1.Secret](r.ms) != nil && len(dep.Spec.Template.Annotations["checksum/secret"]) != 64 {
		t.Errorf("pod annotations %v: no checksum/secret for the chart's Secret", dep.Spec.Template.Annotations)
	}
	if len(pod.TopologySpreadConstraints) == 0 {
		t.Error("no topologySpreadConstraints")
	}
	for _, tsc := range pod.TopologySpreadConstraints {
		s, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
		if err != nil || !s.Matches(labels.Set(dep.Spec.Template.Labels)) {
			t.Errorf("topology spread on %s does not select the pods", tsc.TopologyKey)
		}
	}
	sa := objectsOf[*corev1.ServiceAccount](r.ms)
	if len(sa) == 1 && sa[0].Name != pod.ServiceAccountName {
		t.Errorf("pod serviceAccountName %q, the chart made %q", pod.ServiceAccountName, sa[0].Name)
	}
}

func checkService(t *testing.T, r rendered, dep *appsv1.Deployment, l loaded) {
	t.Helper()
	svc := only[*corev1.Service](t, r.ms)
	c := leashContainer(t, dep.Spec.Template.Spec)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service selector %v does not select the pods %v", svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	want := map[string]string{"http": l.cfg.HTTP.Addr, "grpc": l.cfg.GRPC.Addr, "admin": l.cfg.Admin.Addr}
	for _, p := range svc.Spec.Ports {
		addr, ok := want[p.Name]
		if !ok {
			t.Errorf("Service port %q: not one of http, grpc, admin", p.Name)
			continue
		}
		delete(want, p.Name)
		if got := resolvePort(t, c, p.TargetPort); got != port(t, addr) {
			t.Errorf("Service port %s targets %d, Leash listens on %s", p.Name, got, addr)
		}
		if p.Name == "grpc" && (p.AppProtocol == nil || *p.AppProtocol != "grpc") {
			t.Error("Service port grpc: appProtocol is not grpc (Istio would not speak HTTP/2 to it)")
		}
	}
	if len(want) > 0 {
		t.Errorf("Service lacks ports %v", sortedKeys(want))
	}
}

func checkScaling(t *testing.T, r rendered, dep *appsv1.Deployment, l loaded) {
	t.Helper()
	hpas := objectsOf[*autoscalingv2.HorizontalPodAutoscaler](r.ms)
	memory := l.cfg.Store.Backend == "memory"
	switch {
	case len(hpas) == 1:
		h := hpas[0]
		if dep.Spec.Replicas != nil {
			t.Errorf("Deployment sets replicas %d under an HPA: every upgrade would reset the scale", *dep.Spec.Replicas)
		}
		if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != dep.Name || h.Spec.ScaleTargetRef.APIVersion != "apps/v1" {
			t.Errorf("HPA targets %+v, want Deployment %s", h.Spec.ScaleTargetRef, dep.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas > h.Spec.MaxReplicas || len(h.Spec.Metrics) == 0 {
			t.Errorf("HPA min %v max %d metrics %d", h.Spec.MinReplicas, h.Spec.MaxReplicas, len(h.Spec.Metrics))
		}
		if memory {
			t.Error("an HPA on the memory store: each replica would count on its own")
		}
	case dep.Spec.Replicas == nil:
		t.Error("no replicas and no HPA")
	case memory && *dep.Spec.Replicas > 1:
		t.Errorf("%d replicas on the memory store: each would count on its own", *dep.Spec.Replicas)
	}
	for _, pdb := range objectsOf[*policyv1.PodDisruptionBudget](r.ms) {
		s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !s.Matches(labels.Set(dep.Spec.Template.Labels)) {
			t.Errorf("PDB selector %v does not select the pods", pdb.Spec.Selector)
		}
		if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
			t.Errorf("PDB: want exactly one of minAvailable and maxUnavailable")
		}
		// One replica with minAvailable 1 would block every node drain.
		if dep.Spec.Replicas != nil && pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int &&
			pdb.Spec.MinAvailable.IntVal >= *dep.Spec.Replicas {
			t.Errorf("PDB minAvailable %d with %d replicas blocks node drains", pdb.Spec.MinAvailable.IntVal, *dep.Spec.Replicas)
		}
	}
}

func checkPolicies(t *testing.T, r rendered, dep *appsv1.Deployment) {
	t.Helper()
	c := leashContainer(t, dep.Spec.Template.Spec)
	svc := only[*corev1.Service](t, r.ms)
	for _, sm := range objectsOf[*monitoringv1.ServiceMonitor](r.ms) {
		s, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil || !s.Matches(labels.Set(svc.Labels)) {
			t.Errorf("ServiceMonitor selector %v does not select the Service (labels %v)", sm.Spec.Selector, svc.Labels)
		}
		if !slices.Contains(sm.Spec.NamespaceSelector.MatchNames, svc.Namespace) {
			t.Errorf("ServiceMonitor namespaceSelector %v misses %s", sm.Spec.NamespaceSelector, svc.Namespace)
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "admin" ||
			sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v, want port admin path /metrics", sm.Spec.Endpoints)
		}
	}
	for _, np := range objectsOf[*networkingv1.NetworkPolicy](r.ms) {
		s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !s.Matches(labels.Set(dep.Spec.Template.Labels)) {
			t.Errorf("NetworkPolicy podSelector %v does not select the pods", np.Spec.PodSelector)
		}
		open := map[int32]bool{}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port == nil {
					t.Errorf("NetworkPolicy ingress rule without a port opens every port")
					continue
				}
				open[resolvePort(t, c, *p.Port)] = true
			}
		}
		for _, name := range []string{"http", "grpc", "admin"} {
			if !open[containerPort(t, c, name)] {
				t.Errorf("NetworkPolicy does not admit port %s", name)
			}
		}
		if slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			dns := false
			for _, rule := range np.Spec.Egress {
				for _, p := range rule.Ports {
					dns = dns || p.Port != nil && p.Port.IntVal == 53
				}
			}
			if !dns {
				t.Error("NetworkPolicy restricts egress without allowing DNS")
			}
		}
	}
}

// checkHelmTest checks the `helm test` hook: it asks the Service's admin port for /readyz
// and is not itself selected by the Deployment, Service or PDB.
func checkHelmTest(t *testing.T, r rendered, dep *appsv1.Deployment) {
	t.Helper()
	pod := only[*corev1.Pod](t, r.ms)
	svc := only[*corev1.Service](t, r.ms)
	if pod.Annotations["helm.sh/hook"] != "test" {
		t.Errorf("test pod annotations %v: not a helm test hook", pod.Annotations)
	}
	var admin int32
	for _, p := range svc.Spec.Ports {
		if p.Name == "admin" {
			admin = p.Port
		}
	}
	url := fmt.Sprintf("http://%s.%s.svc:%d/readyz", svc.Name, svc.Namespace, admin)
	if len(pod.Spec.Containers) != 1 || !slices.Contains(pod.Spec.Containers[0].Command, url) {
		t.Errorf("test pod command does not fetch %s: %v", url, pod.Spec.Containers)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("test pod restartPolicy %s", pod.Spec.RestartPolicy)
	}
	sel, _ := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if sel.Matches(labels.Set(pod.Labels)) || labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		t.Errorf("test pod labels %v are selected by the Deployment or Service", pod.Labels)
	}
	for _, np := range objectsOf[*networkingv1.NetworkPolicy](r.ms) {
		for _, rule := range np.Spec.Ingress {
			admits := len(rule.From) == 0
			for _, peer := range rule.From {
				if peer.PodSelector != nil && peer.NamespaceSelector == nil && peer.IPBlock == nil {
					s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
					admits = admits || err == nil && s.Matches(labels.Set(pod.Labels))
				}
			}
			for _, p := range rule.Ports {
				if p.Port != nil && p.Port.String() == "admin" && !admits {
					t.Error("the NetworkPolicy keeps the helm test pod from the admin port")
				}
			}
		}
	}
}

// secretValues lists the plaintext secrets a scenario carries, from its values and from
// the Secrets the user applies: API keys, and all secrets (keys and Redis credentials).
func secretValues(t *testing.T, r rendered) (keys, all []string) {
	t.Helper()
	var out []string
	var vals []map[string]any
	for _, f := range r.v.files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		vals = append(vals, m)
	}
	for _, s := range r.v.set {
		k, v, _ := strings.Cut(s, "=")
		if strings.HasPrefix(k, "secret.apiKeys.") {
			keys = append(keys, v)
		} else if strings.HasPrefix(k, "secret.") {
			out = append(out, v)
		}
	}
	for _, m := range vals {
		sec, _ := m["secret"].(map[string]any)
		byAccount, _ := sec["apiKeys"].(map[string]any)
		for _, list := range byAccount {
			for _, k := range list.([]any) {
				keys = append(keys, k.(string))
			}
		}
		redis, _ := sec["redis"].(map[string]any)
		for _, k := range []string{"password", "url"} {
			if s, _ := redis[k].(string); s != "" {
				out = append(out, s)
			}
		}
	}
	for _, s := range objectsOf[*corev1.Secret](r.existing) {
		for _, text := range s.StringData {
			var doc struct {
				Accounts []struct {
					APIKeys []string `json:"api_keys"`
				} `json:"accounts"`
				Store struct {
					Redis struct {
						Password string `json:"password"`
					} `json:"redis"`
				} `json:"store"`
			}
			if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
				t.Fatal(err)
			}
			for _, a := range doc.Accounts {
				keys = append(keys, a.APIKeys...)
			}
			if doc.Store.Redis.Password != "" {
				out = append(out, doc.Store.Redis.Password)
			}
		}
	}
	return keys, append(out, keys...)
}

// checkSecretsOutOfConfigMaps: no plaintext key or password is in a ConfigMap, an
// annotation or a literal env value, and the chart's Secret does carry the ones from values.
func checkSecretsOutOfConfigMaps(t *testing.T, r rendered) {
	t.Helper()
	_, secrets := secretValues(t, r)
	for _, m := range r.ms {
		if _, ok := m.obj.(*corev1.Secret); ok {
			continue
		}
		for _, s := range secrets {
			if strings.Contains(m.text, s) {
				t.Errorf("%s contains the secret value %q", m.source, s)
			}
		}
	}
	for _, cm := range objectsOf[*corev1.ConfigMap](r.ms) {
		for key, text := range cm.Data {
			var doc map[string]any
			if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
				continue // descriptor files as text are checked by the loader
			}
			for _, a := range asList(doc["accounts"]) {
				if _, ok := a.(map[string]any)["api_keys"]; ok {
					t.Errorf("ConfigMap %s %s: an account has api_keys", cm.Name, key)
				}
			}
			if redis, ok := dig(doc, "store", "redis").(map[string]any); ok {
				if _, ok := redis["password"]; ok {
					t.Errorf("ConfigMap %s %s: store.redis.password", cm.Name, key)
				}
			}
		}
	}
	if chartSecrets := objectsOf[*corev1.Secret](r.ms); len(chartSecrets) == 1 {
		var all strings.Builder
		for _, b := range chartSecrets[0].Data {
			all.Write(b)
		}
		for _, s := range secrets {
			if !strings.Contains(all.String(), s) {
				t.Errorf("the chart's Secret lacks the secret value %q given in the values", s)
			}
		}
	}
	for _, dep := range objectsOf[*appsv1.Deployment](r.ms) {
		for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
			if strings.Contains(e.Name, "PASSWORD") || strings.Contains(e.Name, "REDIS_URL") {
				if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					t.Errorf("env %s is not read from a Secret", e.Name)
				}
			}
		}
	}
}

func asList(v any) []any { l, _ := v.([]any); return l }

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// chartAppVersion reads appVersion from Chart.yaml.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %v", err)
	}
	return c.AppVersion
}

// checkKeysReachLeash: every plaintext API key of the scenario is an account's key in the
// config the container loads (the Secret's file is read, and after the ConfigMap's).
func checkKeysReachLeash(t *testing.T, r rendered, l loaded) {
	t.Helper()
	keys, _ := secretValues(t, r)
	for _, k := range keys {
		if _, ok := l.direct.Lookup(k); !ok {
			t.Errorf("API key %q from the scenario's secrets is no account's key in the loaded config", k)
		}
	}
}

// checkDescriptorsLoaded: every file of the chart's descriptor ConfigMap is one Leash
// loads from envoy.config_paths.
func checkDescriptorsLoaded(t *testing.T, r rendered, l loaded) {
	t.Helper()
	for _, cm := range objectsOf[*corev1.ConfigMap](r.ms) {
		if !strings.HasSuffix(cm.Name, "-descriptors") {
			continue
		}
		if l.envoy == nil {
			t.Fatalf("ConfigMap %s is rendered, but Leash loads no descriptor files", cm.Name)
		}
		for key := range cm.Data {
			if !slices.ContainsFunc(l.envoy.Files(), func(f string) bool { return filepath.Base(f) == key }) {
				t.Errorf("descriptor file %s of ConfigMap %s is not among the files Leash loads: %v", key, cm.Name, l.envoy.Files())
			}
		}
	}
}
