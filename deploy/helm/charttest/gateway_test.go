package charttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/leashd/leash/cmd/leash/peerenv"
	"github.com/leashd/leash/config"
)

// envoyGatewayExample is the EnvoyGateway resource that makes Envoy Gateway run Leash.
const envoyGatewayExample = "../../envoy-gateway/envoy-gateway.yaml"

// TestEnvoyGatewayExample checks deploy/envoy-gateway/envoy-gateway.yaml: an EnvoyGateway
// resource whose rate-limit container is the chart's image at its appVersion, with a
// Redis backend, and whose env entries are variables Leash reads as ratelimit and accepts
// (the peer's, or LEASH_ keys).
func TestEnvoyGatewayExample(t *testing.T) {
	b, err := os.ReadFile(envoyGatewayExample)
	if err != nil {
		t.Fatal(err)
	}
	var eg struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Gateway    struct {
			ControllerName string `json:"controllerName"`
		} `json:"gateway"`
		Provider struct {
			Type       string `json:"type"`
			Kubernetes struct {
				RateLimitDeployment struct {
					Container struct {
						Image string `json:"image"`
						Env   []struct {
							Name  string `json:"name"`
							Value string `json:"value"`
						} `json:"env"`
					} `json:"container"`
				} `json:"rateLimitDeployment"`
			} `json:"kubernetes"`
		} `json:"provider"`
		RateLimit struct {
			Backend struct {
				Type  string `json:"type"`
				Redis struct {
					URL string `json:"url"`
				} `json:"redis"`
			} `json:"backend"`
		} `json:"rateLimit"`
	}
	if err := yaml.UnmarshalStrict(b, &eg); err != nil {
		t.Fatal(err)
	}
	if eg.APIVersion != "gateway.envoyproxy.io/v1alpha1" || eg.Kind != "EnvoyGateway" || eg.Provider.Type != "Kubernetes" {
		t.Errorf("%s/%s provider %s: want a gateway.envoyproxy.io/v1alpha1 EnvoyGateway on Kubernetes", eg.APIVersion, eg.Kind, eg.Provider.Type)
	}
	c := eg.Provider.Kubernetes.RateLimitDeployment.Container
	if want := chartImageRepository(t) + ":" + chartAppVersion(t); c.Image != want {
		t.Errorf("image %q, want the chart's %q", c.Image, want)
	}
	if eg.RateLimit.Backend.Type != "Redis" || eg.RateLimit.Backend.Redis.URL == "" {
		t.Errorf("rateLimit.backend %+v: want Redis with a URL", eg.RateLimit.Backend)
	}
	// The container's environment as Envoy Gateway builds it, with the example's entries.
	env := []string{"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL=envoy-gateway:18001",
		"CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + eg.RateLimit.Backend.Redis.URL,
		"USE_STATSD=false", "USE_PROMETHEUS=true", "PROMETHEUS_ADDR=:19001"}
	known := map[string]bool{}
	for _, s := range peerenv.Settings {
		for _, n := range s.Names {
			known[n] = true
		}
	}
	for _, e := range c.Env {
		if !known[e.Name] && !strings.HasPrefix(e.Name, "LEASH_") {
			t.Errorf("env %s: neither the peer's variable nor a LEASH_ one", e.Name)
		}
		env = append(env, e.Name+"="+e.Value)
	}
	translated, err := peerenv.Environ(env)
	if err != nil {
		t.Fatalf("Leash refuses the example's environment: %v", err)
	}
	cfg, err := config.Load(translated.ConfigFiles, translated.Environ)
	if err != nil {
		t.Fatalf("the example's environment: %v", err)
	}
	if !cfg.Envoy.Overdraft || !cfg.Envoy.ResponseHeaders || cfg.Log.Format != "json" {
		t.Errorf("envoy.overdraft %v, envoy.response_headers %v, log.format %s: the example's env entries did not apply",
			cfg.Envoy.Overdraft, cfg.Envoy.ResponseHeaders, cfg.Log.Format)
	}
}

// chartImageRepository reads image.repository from the chart's values.yaml.
func chartImageRepository(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil || v.Image.Repository == "" {
		t.Fatalf("values.yaml image.repository: %v", err)
	}
	return v.Image.Repository
}
