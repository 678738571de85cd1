package charttest

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestLint runs `helm lint --strict` with the default values and with every example
// values file.
func TestLint(t *testing.T) {
	runs := map[string][]string{"default values": nil}
	for _, f := range exampleValues(t) {
		runs[filepath.Base(f)] = []string{"-f", f}
	}
	for name, flags := range runs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"lint", "--strict", chartDir}, flags...)
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("unexpected lint output:\n%s", out)
			}
		})
	}
}

// TestLintRejectsSchemaViolations lints with each file of testdata/invalid, which must
// fail values.schema.json; the file's first line, "# want: ...", is a text the error must
// contain.
func TestLintRejectsSchemaViolations(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid values files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			want := wantLine(t, f)
			_, err := runHelm(t, "lint", "--strict", chartDir, "-f", f)
			if err == nil {
				t.Fatal("helm lint accepted the values")
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") {
				t.Fatalf("helm lint failed, but not on the schema:\n%s", msg)
			}
			if !strings.Contains(msg, want) {
				t.Fatalf("the schema error does not mention %q:\n%s", want, msg)
			}
		})
	}
}

func wantLine(t *testing.T, file string) string {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	if sc.Scan() {
		if w, ok := strings.CutPrefix(sc.Text(), "# want: "); ok && w != "" {
			return w
		}
	}
	t.Fatalf("%s: the first line must be \"# want: <text of the error>\"", file)
	return ""
}

// TestChartRefuses checks the rules the schema cannot express: helm template (and so
// helm install) fails with a message that says what to do.
func TestChartRefuses(t *testing.T) {
	redis := []string{"config.store.backend=redis", "config.accounts[0].id=acme", "config.accounts[0].plan=pro"}
	cases := []struct {
		name string
		set  []string
		want string
	}{
		{"two replicas on the memory store", []string{"replicaCount=2"},
			"each replica would count on its own. Use config.store.backend: redis"},
		{"autoscaling on the memory store", []string{"autoscaling.enabled=true"},
			"autoscaling.enabled with config.store.backend memory"},
		{"several replicas, no accounts", []string{"config.store.backend=redis", "replicaCount=3"},
			"each pod would make up its own dev API key"},
		{"grace period not above the shutdown timeout", []string{"terminationGracePeriodSeconds=10"},
			"terminationGracePeriodSeconds (10) must be above config.shutdown.timeout (10s)"},
		{"grace period against a longer timeout", []string{"config.shutdown.timeout=1m", "terminationGracePeriodSeconds=45"},
			"must be above config.shutdown.timeout (60s)"},
		{"grace period against a fractional timeout", []string{"config.shutdown.timeout=12.5s", "terminationGracePeriodSeconds=10"},
			"must be above config.shutdown.timeout (13s)"},
		{"grace period against an hour", []string{"config.shutdown.timeout=1h", "terminationGracePeriodSeconds=15"},
			"must be above config.shutdown.timeout (3600s)"},
		{"grace period against hours, minutes and milliseconds", []string{"config.shutdown.timeout=1h1m500ms", "terminationGracePeriodSeconds=3660"},
			"must be above config.shutdown.timeout (3661s)"},
		{"keys for an unknown account", append(redis[:1:1], "secret.apiKeys.nobody[0]=k"),
			"secret.apiKeys.nobody: no account \"nobody\""},
		{"existing secret and chart secret values", []string{"secret.existingSecret=mine", "secret.redis.password=pw"},
			"secret.existingSecret is set"},
		{"redis URL secret with a cluster", append(redis, "config.store.redis.cluster_addrs[0]=r:6379", "redisSecretRef.url.name=r"),
			"cannot be combined with config.store.redis.cluster_addrs"},
		{"two listeners on one port", []string{"containerPorts.admin=8080"},
			"the http, grpc and admin ports must differ (8080, 8081, 8080)"},
		{"HPA bounds", append(redis, "autoscaling.enabled=true", "autoscaling.minReplicas=5", "autoscaling.maxReplicas=3"),
			"autoscaling.minReplicas is above autoscaling.maxReplicas"},
		{"sidecar without accounts", []string{"mode=sidecar"},
			"mode sidecar needs accounts: without them each pod's Leash would make up its own dev API key"},
		{"sidecar on redis without accounts", []string{"mode=sidecar", "config.store.backend=redis"},
			"mode sidecar needs accounts"},
		{"two replicas on the disk store", []string{"config.store.backend=disk", "replicaCount=2"},
			"replicaCount is 2 with config.store.backend disk: each replica would count on its own"},
		{"autoscaling on the disk store", []string{"config.store.backend=disk", "autoscaling.enabled=true"},
			"autoscaling.enabled with config.store.backend disk"},
		{"sidecar on the disk store", []string{"mode=sidecar", "config.store.backend=disk", "config.accounts[0].id=acme", "config.accounts[0].plan=pro"},
			"mode sidecar with config.store.backend disk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, "leash", "leash", values{set: tc.set})
			if err == nil {
				t.Fatal("helm template accepted the values")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not say %q:\n%v", tc.want, err)
			}
		})
	}
	// The same with redis is accepted, so the refusals above are about the store.
	if _, err := template(t, "leash", "leash", values{set: append(redis, "replicaCount=3", "autoscaling.enabled=true")}); err != nil {
		t.Fatalf("several replicas on redis: %v", err)
	}
	// A sidecar with accounts, in the values or in a Secret of the user's, is accepted.
	for _, set := range [][]string{
		{"mode=sidecar", "config.accounts[0].id=acme", "config.accounts[0].plan=pro"},
		{"mode=sidecar", "secret.existingSecret=mine"},
	} {
		if _, err := template(t, "leash", "leash", values{set: set}); err != nil {
			t.Errorf("%v: %v", set, err)
		}
	}
}

// TestConfigChangeRollsPods: the pod template's checksum annotations follow the config,
// the descriptors and the chart's Secret, and nothing else.
func TestConfigChangeRollsPods(t *testing.T) {
	base := values{files: []string{examplesDir + "/values-redis.yaml"}, set: []string{"secret.redis.password=one"}}
	annotations := func(v values) map[string]string {
		t.Helper()
		out, err := template(t, "leash", "leash", v)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := decodeAll(out)
		if err != nil {
			t.Fatal(err)
		}
		return only[*appsv1.Deployment](t, ms).Spec.Template.Annotations
	}
	with := func(more ...string) values {
		v := base
		v.set = append(append([]string{}, base.set...), more...)
		return v
	}
	before := annotations(base)
	cases := []struct {
		name           string
		v              values
		config, secret bool // which checksum must change
	}{
		{"same values", base, false, false},
		{"config", with("config.log.level=debug"), true, false},
		{"descriptors", with("descriptors.edge\\.yaml.descriptors[0].rate_limit.requests_per_unit=7"), true, false},
		{"secret", with("secret.redis.password=two"), false, true},
		{"replicas only", with("replicaCount=4"), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			after := annotations(tc.v)
			for key, want := range map[string]bool{"checksum/config": tc.config, "checksum/secret": tc.secret} {
				if before[key] == "" {
					t.Fatalf("no %s annotation", key)
				}
				if changed := before[key] != after[key]; changed != want {
					t.Errorf("%s changed = %v, want %v", key, changed, want)
				}
			}
		})
	}
}
