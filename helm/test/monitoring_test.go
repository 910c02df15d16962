package charttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// The metrics weighstation exports: Envoy's /stats/prometheus (the filter, labelled by the
// bootstrap's stats_tags) and the control plane's /metrics. Dashboards and alerts may use only
// these, so a typo in a query is a test failure, not an empty panel.
var knownMetrics = map[string]bool{
	"weighstation_messages_accepted":                              true,
	"weighstation_bytes_accepted":                                 true,
	"weighstation_messages_refused":                               true,
	"weighstation_messages_delayed":                               true,
	"weighstation_dryrun_would_refuse":                            true,
	"weighstation_connections_active":                             true,
	"weighstation_in_flight":                                      true,
	"weighstation_queue_depth":                                    true,
	"weighstation_delay_ms_bucket":                                true,
	"weighstation_limit_max_message_bytes":                        true,
	"weighstation_bytes_consumed":                                 true,
	"weighstation_consume_throttled":                              true,
	"weighstation_consume_held_ms":                                true,
	"weighstation_dryrun_consume_would_throttle":                  true,
	"weighstation_consume_slow_consumers":                         true,
	"weighstation_connections_closed":                             true,
	"weighstation_policy_generation":                              true,
	"weighstation_controlplane_policy_generation":                 true,
	"weighstation_controlplane_policy_error":                      true,
	"weighstation_controlplane_tls_error":                         true,
	"weighstation_controlplane_tls_certificate_not_after_seconds": true,
	"weighstation_controlplane_reloads_total":                     true,
	"weighstation_controlplane_node_connected":                    true,
	"weighstation_controlplane_node_in_sync":                      true,
	"weighstation_controlplane_node_nack":                         true,
	"weighstation_controlplane_kafka_broker_fronted":              true,
	"weighstation_client_pool_overflow":                           true,
	"weighstation_client_messages_per_second":                     true,
	"weighstation_client_bytes_per_second":                        true,
	"weighstation_client_refused_per_second":                      true,
}

var metricRE = regexp.MustCompile(`\bweighstation_[a-z_]+`)

func unknownMetrics(expr string) []string {
	var bad []string
	for _, m := range metricRE.FindAllString(expr, -1) {
		if !knownMetrics[m] {
			bad = append(bad, m)
		}
	}
	return bad
}

// The alerts the chart installs pass `promtool check rules` and fire, with the labels and
// annotations an on-call engineer sees, in the situations of helm/test/alerts_test.yaml.
func TestAlertsFireWhenTheyShould(t *testing.T) {
	ms := mustRender(t, []string{"values/production.yaml"})
	rule := ms.find(t, "PrometheusRule", "")
	spec, err := sigsyaml.Marshal(rule["spec"])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, nil, promtool, "check", "rules", filepath.Join(dir, "alerts.yaml"))
	if code != 0 || !strings.Contains(out, "SUCCESS: 15 rules found") {
		t.Fatalf("promtool check rules: exit %d\n%s%s", code, out, stderr)
	}
	for _, m := range metricRE.FindAllString(string(spec), -1) {
		if !knownMetrics[m] {
			t.Errorf("alert uses unknown metric %s", m)
		}
	}
	tests := readFile(t, "alerts_test.yaml")
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = run(t, nil, promtool, "test", "rules", filepath.Join(dir, "alerts_test.yaml"))
	if code != 0 {
		t.Fatalf("promtool test rules: exit %d\n%s%s", code, out, stderr)
	}
	// Every alert is exercised by the unit tests.
	for _, name := range regexp.MustCompile(`(?m)^\s+- alert: (\w+)`).FindAllStringSubmatch(string(spec), -1) {
		if !strings.Contains(tests, "alertname: "+name[1]) {
			t.Errorf("alert %s has no promtool test", name[1])
		}
	}
}

// The Grafana dashboard shipped in the ConfigMap is valid JSON whose every query is valid
// PromQL (checked by promtool as recording rules, with Grafana's variables filled in) over
// metrics weighstation exports, and it shows what the issue asks for.
func TestDashboardQueriesAreValidPromQL(t *testing.T) {
	ms := mustRender(t, []string{"values/production.yaml"})
	cm := ms.find(t, "ConfigMap", "-dashboard")
	if get(cm, "metadata", "labels", "grafana_dashboard") != "1" {
		t.Error("the dashboard ConfigMap lacks the Grafana sidecar label")
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(get(cm, "data", "weighstation.json").(string)), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" {
		t.Error("dashboard has no uid (Grafana would duplicate it on every sync)")
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*", "$tenant", ".*", "$protocol", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	var all []string
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			n++
			expr := vars.Replace(tg.Expr)
			all = append(all, expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q: unresolved variable in %s", p.Title, tg.Expr)
			}
			if bad := unknownMetrics(expr); len(bad) > 0 {
				t.Errorf("panel %q uses unknown metrics %v", p.Title, bad)
			}
			js, _ := json.Marshal(expr)
			fmt.Fprintf(&rules, "      - record: dashboard:panel_%d\n        expr: %s\n", n, js)
		}
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, nil, promtool, "check", "rules", f)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", n)) {
		t.Fatalf("dashboard queries are not valid PromQL: exit %d\n%s%s", code, out, stderr)
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{
		"weighstation_messages_accepted", "weighstation_messages_refused", "weighstation_messages_delayed",
		"weighstation_in_flight", "weighstation_queue_depth", "histogram_quantile(0.99", "weighstation_delay_ms_bucket",
		"weighstation_dryrun_would_refuse", "weighstation_controlplane_node_nack",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the dashboard has no panel using %s", want)
		}
	}
	var missing []string
	for m := range knownMetrics {
		if !strings.Contains(joined, m) {
			missing = append(missing, m)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("metrics without a panel: %v", missing)
	}
}
