package charttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// dashboardFile and alertsFile are the dashboard and alerting rules the chart ships
// (spec §12.9).
var (
	dashboardFile = filepath.Join(chartDir, "files", "leash-dashboard.json")
	alertsFile    = filepath.Join(chartDir, "files", "leash-alerts.yaml")
)

// checkDashboardAndRules: when rendered, the dashboard ConfigMap carries the Grafana
// sidecar's label and the dashboard file unchanged, and the PrometheusRule carries every
// rule of the alerts file unchanged.
func checkDashboardAndRules(t *testing.T, r rendered) {
	t.Helper()
	for _, cm := range objectsOf[*corev1.ConfigMap](r.ms) {
		if cm.Name != r.release+"-dashboard" && cm.Name != r.release+"-leash-dashboard" {
			continue
		}
		if cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard: \"1\"", cm.Labels)
		}
		want, err := os.ReadFile(dashboardFile)
		if err != nil {
			t.Fatal(err)
		}
		got := cm.Data["leash-dashboard.json"]
		if got+"\n" != string(want) && got != string(want) {
			t.Errorf("the ConfigMap's dashboard differs from %s", dashboardFile)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(got), &d); err != nil {
			t.Errorf("dashboard is not JSON: %v", err)
		}
		if r.name == "dashboard and alerts" && cm.Annotations["grafana_folder"] != "Leash" {
			t.Errorf("dashboard annotations %v lack grafana_folder", cm.Annotations)
		}
	}
	for _, pr := range objectsOf[*monitoringv1.PrometheusRule](r.ms) {
		b, err := os.ReadFile(alertsFile)
		if err != nil {
			t.Fatal(err)
		}
		var want monitoringv1.PrometheusRuleSpec
		if err := yaml.UnmarshalStrict(b, &want); err != nil {
			t.Fatalf("%s: %v", alertsFile, err)
		}
		got, _ := json.Marshal(pr.Spec)
		wantJSON, _ := json.Marshal(want)
		if string(got) != string(wantJSON) {
			t.Errorf("the PrometheusRule's spec differs from %s", alertsFile)
		}
		if r.name == "dashboard and alerts" && pr.Labels["release"] != "kube-prometheus-stack" {
			t.Errorf("PrometheusRule labels %v lack the configured one", pr.Labels)
		}
		n := 0
		for _, g := range pr.Spec.Groups {
			n += len(g.Rules)
		}
		if n < 6 {
			t.Errorf("%d rules rendered", n)
		}
	}
}

// TestAlertsFileIsARuleFile: the alerts file is a plain Prometheus rule file too (every
// rule has a name, an expression, a severity and a summary), for use without the
// Prometheus Operator.
func TestAlertsFileIsARuleFile(t *testing.T) {
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var spec monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(b, &spec); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr.String() == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("incomplete rule %+v", r)
			}
			names[r.Alert] = true
		}
	}
	for _, want := range []string{"LeashStoreUnavailable", "LeashReadinessFlapping", "LeashDenialRatioSpike",
		"LeashWebhookOutboxGrowing", "LeashWebhookDeliveryFailures", "LeashHardCapReached"} {
		if !names[want] {
			t.Errorf("no alert %s", want)
		}
	}
}
