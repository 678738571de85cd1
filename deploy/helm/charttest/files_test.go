package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/config"
	"github.com/leashd/leash/engine"
)

// containerFiles returns the files the container sees through its ConfigMap and Secret
// volume mounts, by absolute path. ConfigMaps and Secrets are looked up among objs (the
// rendered ones and any the user creates beforehand).
func containerFiles(pod corev1.PodSpec, c corev1.Container, objs []manifest) (map[string][]byte, error) {
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	files := map[string][]byte{}
	for _, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: no such volume in the pod", vm.Name)
		}
		var data map[string][]byte
		var items []corev1.KeyToPath
		switch {
		case v.ConfigMap != nil:
			cm := findByName[*corev1.ConfigMap](objs, v.ConfigMap.Name)
			if cm == nil {
				return nil, fmt.Errorf("volume %q: ConfigMap %q is neither rendered nor given", v.Name, v.ConfigMap.Name)
			}
			data = map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			items = v.ConfigMap.Items
		case v.Secret != nil:
			s := findByName[*corev1.Secret](objs, v.Secret.SecretName)
			if s == nil {
				return nil, fmt.Errorf("volume %q: Secret %q is neither rendered nor given", v.Name, v.Secret.SecretName)
			}
			data = map[string][]byte{}
			for k, b := range s.Data {
				data[k] = b
			}
			for k, str := range s.StringData {
				data[k] = []byte(str)
			}
			items = v.Secret.Items
		default:
			continue // other volumes carry no Leash config
		}
		if vm.SubPath != "" {
			return nil, fmt.Errorf("volumeMount %q uses subPath: ConfigMap updates would not reach the container", vm.Name)
		}
		if len(items) == 0 {
			for k := range data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			b, ok := data[it.Key]
			if !ok {
				return nil, fmt.Errorf("volume %q: no key %q", v.Name, it.Key)
			}
			files[filepath.Join(vm.MountPath, it.Path)] = b
		}
	}
	return files, nil
}

// findByName returns the object of type T named name, or the zero T.
func findByName[T interface {
	runtime.Object
	comparable
	GetName() string
}](objs []manifest, name string) T {
	var zero T
	for _, o := range objectsOf[T](objs) {
		if o.GetName() == name {
			return o
		}
	}
	return zero
}

// configArgs returns the files named by --config in args, in order.
func configArgs(args []string) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--config" || a == "-config":
			if i+1 >= len(args) {
				return nil, fmt.Errorf("args %q: --config without a file", args)
			}
			out = append(out, args[i+1])
			i++
		case strings.HasPrefix(a, "--config="):
			out = append(out, strings.TrimPrefix(a, "--config="))
		default:
			return nil, fmt.Errorf("args %q: unexpected %q (the image's entrypoint is `leash serve`)", args, a)
		}
	}
	return out, nil
}

// secretEnvValue stands in for a value a container reads from a Secret.
func secretEnvValue(name string) string {
	if strings.HasSuffix(name, "_URL") {
		return "redis://from-a-secret.invalid:6379/0"
	}
	return "value-from-a-secret"
}

// loaded is a container's config as the binary would load it.
type loaded struct {
	cfg    *config.Config
	files  map[string][]byte // container path -> content
	paths  []string          // --config files, container paths
	envoy  *descriptors.Config
	direct *engine.Directory
}

// loadContainerConfig writes the container's mounted files under a temp folder, loads
// the --config files in the order of the container's args with its environment (values
// from Secrets stand in), then loads the descriptor files envoy.config_paths names and
// checks them against the accounts, as `leash serve` does at start-up.
func loadContainerConfig(t *testing.T, pod corev1.PodSpec, c corev1.Container, objs []manifest) loaded {
	t.Helper()
	files, err := containerFiles(pod, c, objs)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := configArgs(c.Args)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("container %q: no --config in args %q", c.Name, c.Args)
	}
	root := t.TempDir()
	for p, b := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var local []string
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			t.Fatalf("--config %s: not an absolute path", p)
		}
		if _, ok := files[p]; !ok {
			t.Fatalf("--config %s: no mounted ConfigMap or Secret key provides this file (mounted: %v)", p, sortedKeys(files))
		}
		local = append(local, filepath.Join(root, p))
	}
	var environ []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			environ = append(environ, e.Name+"="+secretEnvValue(e.Name))
		case e.ValueFrom != nil:
			t.Fatalf("env %s: only values and secretKeyRef are expected", e.Name)
		default:
			environ = append(environ, e.Name+"="+e.Value)
		}
	}
	cfg, err := config.Load(local, environ)
	if err != nil {
		t.Fatalf("Leash's config loader rejects the rendered config (--config %v): %v", paths, err)
	}
	l := loaded{cfg: cfg, files: files, paths: paths}

	l.direct, err = directory(cfg)
	if err != nil {
		t.Fatalf("accounts: %v", err)
	}
	routing := domains.Routing{DefaultAccount: cfg.Envoy.DefaultAccount, Domains: map[string]string{}}
	for d, v := range cfg.Envoy.Domains {
		routing.Domains[d] = v.Account
	}
	ec := &domains.Config{Routing: routing}
	if len(cfg.Envoy.ConfigPaths) > 0 {
		var dp []string
		for _, p := range cfg.Envoy.ConfigPaths {
			dp = append(dp, filepath.Join(root, p))
		}
		if l.envoy, err = descriptors.Load(dp...); err != nil {
			t.Fatalf("descriptor files (envoy.config_paths %v): %v", cfg.Envoy.ConfigPaths, err)
		}
		ec.Descriptors = l.envoy
	}
	if err := ec.Validate(l.direct); err != nil {
		t.Fatalf("descriptors against the accounts: %v", err)
	}
	return l
}

// directory is the accounts as `leash serve` builds them: the configured ones, or the
// dev account on plan scale when there are none.
func directory(cfg *config.Config) (*engine.Directory, error) {
	if cfg.HasAccounts() {
		return cfg.Directory()
	}
	return engine.NewDirectory([]engine.AccountSpec{{ID: config.DevAccountID, Plan: cfg.Plans["scale"],
		KeyHashes: [][32]byte{engine.HashKey("dev")}}})
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
