package charttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// valueSets are the realistic installs every test below renders (every file of values/): the
// defaults, an existing 3-broker Kafka, NATS only, a 3-server NATS cluster closed to everyone but
// the gateway, and everything on (HPA, ServiceMonitor, PrometheusRule, dashboard, NetworkPolicy,
// digests, an existing policy ConfigMap), among others.
func valueSets(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("values/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("value sets: %v %v", files, err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[strings.TrimSuffix(filepath.Base(f), ".yaml")] = mustAbs(f)
	}
	return out
}

// Kinds kubeconform has no schema for (CRDs of the Prometheus Operator and cert-manager): each is decoded strictly
// into the operator's own Go types instead, so an unknown or mistyped field fails as well.
var crdKinds = map[string]func([]byte) error{
	"ServiceMonitor": func(b []byte) error { return strictDecode(b, &monitoringv1.ServiceMonitor{}) },
	"PrometheusRule": func(b []byte) error { return strictDecode(b, &monitoringv1.PrometheusRule{}) },
	"Certificate":    func(b []byte) error { return strictDecode(b, &certmanagerv1.Certificate{}) },
}

func strictDecode(doc []byte, into any) error {
	js, err := sigsyaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

func kubeconformArgs(kubeVersion string) []string {
	skip := make([]string, 0, len(crdKinds))
	for k := range crdKinds {
		skip = append(skip, k)
	}
	return []string{
		"-strict", "-summary", "-output", "text",
		"-kubernetes-version", kubeVersion,
		"-skip", strings.Join(skip, ","),
		"-schema-location", filepath.Join(schemaDir, "{{.NormalizedKubernetesVersion}}-local{{.StrictSuffix}}/{{.ResourceKind}}{{.KindSuffix}}.json"),
	}
}

var summaryRE = regexp.MustCompile(`Summary: (\d+) resources? found .* Valid: (\d+), Invalid: (\d+), Errors: (\d+), Skipped: (\d+)`)

// Every value set passes `helm lint --strict`, renders for the oldest and newest supported
// Kubernetes, and every rendered object validates strictly (unknown fields are errors).
func TestValueSetsLintRenderAndValidateStrictly(t *testing.T) {
	for name, file := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			for _, kv := range kubeVersions {
				if out, stderr, code := run(t, nil, helmBin, "lint", chartDir, "--strict", "--quiet", "--kube-version", kv, "-f", file); code != 0 {
					t.Fatalf("helm lint (Kubernetes %s): exit %d\n%s%s", kv, code, out, stderr)
				}
				out, stderr, code := render(t, kv, []string{file})
				if code != 0 {
					t.Fatalf("helm template (Kubernetes %s): exit %d: %s", kv, code, stderr)
				}
				docs := parseManifests(t, out)

				res, stderr, code := run(t, strings.NewReader(out), kubeconform, append(kubeconformArgs(kv), "-")...)
				if code != 0 {
					t.Fatalf("kubeconform (Kubernetes %s): exit %d\n%s%s", kv, code, res, stderr)
				}
				m := summaryRE.FindStringSubmatch(res)
				if m == nil {
					t.Fatalf("kubeconform printed no summary: %s", res)
				}
				crds := 0
				for _, d := range docs {
					check, ok := crdKinds[d.kind()]
					if !ok {
						continue
					}
					crds++
					b, err := sigsyaml.Marshal(map[string]any(d))
					if err != nil {
						t.Fatal(err)
					}
					if err := check(b); err != nil {
						t.Errorf("%s %s does not match the Prometheus Operator's API: %v", d.kind(), d.name(), err)
					}
				}
				// Every object was checked by one of the two: none slipped through as "skipped".
				if m[1] != fmt.Sprint(len(docs)) || m[2] != fmt.Sprint(len(docs)-crds) || m[5] != fmt.Sprint(crds) {
					t.Errorf("Kubernetes %s: %d objects rendered, %d CRD objects decoded; kubeconform: %s", kv, len(docs), crds, m[0])
				}
			}
		})
	}
}

// The validation above can fail: an unknown field in a Deployment and in a ServiceMonitor are
// both reported.
func TestStrictValidationRejectsUnknownFields(t *testing.T) {
	bad := `apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers: [{name: c, image: i, readinessProbes: {}}]
`
	out, _, code := run(t, strings.NewReader(bad), kubeconform, append(kubeconformArgs(kubeVersions[0]), "-")...)
	if code == 0 || !strings.Contains(out, "readinessProbes") {
		t.Errorf("kubeconform accepted an unknown container field: exit %d: %s", code, out)
	}
	sm := "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec:\n  endpoints: [{port: metrics, intervall: 30s}]\n"
	if err := crdKinds["ServiceMonitor"]([]byte(sm)); err == nil || !strings.Contains(err.Error(), "intervall") {
		t.Errorf("a ServiceMonitor with an unknown field was accepted: %v", err)
	}
}

// The policies the chart renders into its ConfigMap are a valid policy directory for the
// control plane, in every value set that renders one, and the ConfigMap is the one mounted.
func TestRenderedPoliciesPassWeighstationValidate(t *testing.T) {
	checked := 0
	for name, file := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			ms := mustRender(t, []string{file})
			cp := ms.find(t, "Deployment", "-control-plane")
			if args := strings_(container(t, cp, "containers", "control-plane")["args"]); slices.Contains(args, "--policy-source=kubernetes") {
				return // no policy files: TestPolicyObjectsSource
			}
			mounted := get(cp, "spec", "template", "spec", "volumes", 0, "configMap", "name")
			var cm object
			for _, o := range ms {
				if o.kind() == "ConfigMap" && strings.HasSuffix(o.name(), "-policies") {
					cm = o
				}
			}
			if cm == nil {
				if !strings.Contains(readFile(t, file), "existingConfigMap") {
					t.Fatal("no policies ConfigMap rendered and no existingConfigMap set")
				}
				if mounted != "platform-weighstation-policies" {
					t.Errorf("the control plane mounts %v, not the existing ConfigMap", mounted)
				}
				return
			}
			if mounted != cm.name() {
				t.Errorf("the control plane mounts %v, the chart renders %s", mounted, cm.name())
			}
			dir := writePolicies(t, cm)
			out, stderr, code := run(t, nil, weighBin, "validate", dir)
			if code != 0 {
				t.Fatalf("weighstation validate: exit %d\n%s", code, stderr)
			}
			if !strings.Contains(out, "valid (") {
				t.Errorf("weighstation validate: %s", out)
			}
			checked++
		})
	}
	if checked < 3 {
		t.Errorf("only %d value sets rendered policies", checked)
	}
}

// And the check is real: a broken policy in values renders (the chart cannot judge policies)
// but fails validation with the file, line and field of the error.
func TestBrokenPolicyInValuesFailsValidate(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(`policies:
  files:
    defaults.yaml: |
      apiVersion: weighstation.io/v1alpha1
      kind: GatewayDefaults
      metadata: {name: defaults}
      spec: {defaultTenant: default}
      ---
      apiVersion: weighstation.io/v1alpha1
      kind: LimitPolicy
      metadata: {name: default}
      spec:
        tenant: default
        limits:
          inFlight: 0
`), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := writePolicies(t, mustRender(t, []string{bad}).find(t, "ConfigMap", "-policies"))
	_, stderr, code := run(t, nil, weighBin, "validate", dir)
	if code != 1 || !strings.Contains(stderr, "defaults.yaml:12:") || !strings.Contains(stderr, "spec.limits.inFlight") {
		t.Errorf("weighstation validate: exit %d, want 1 and defaults.yaml:12: spec.limits.inFlight\n%s", code, stderr)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
