package charttest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// policies.source: kubernetes renders what the control plane needs to watch policy objects and
// nothing it does not: no policy ConfigMap or volume; a service account token; read access to
// both kinds, patch on their status and one Lease; the pod's namespace and name; the CRDs as
// generated, kept on uninstall, or none with crds.install=false.
func TestPolicyObjectsSource(t *testing.T) {
	ms := mustRender(t, []string{valueSets(t)["kubernetes-policies"]})
	dep := ms.find(t, "Deployment", "-control-plane")
	cp := container(t, dep, "containers", "control-plane")
	args := strings_(cp["args"])
	for _, want := range []string{"--policy-source=kubernetes", "--leader-lease=weighstation-policy-status"} {
		if !slices.Contains(args, want) {
			t.Errorf("the control plane's arguments lack %s: %v", want, args)
		}
	}
	if _, ok := flagValue(args, "policy-dir"); ok {
		t.Errorf("a policy directory is passed with policy objects: %v", args)
	}
	if _, ok := flagValue(args, "peers-dns"); !ok {
		t.Error("no --peers-dns: the status writer could count only its own gateways")
	}
	for _, o := range ms {
		if o.kind() == "ConfigMap" && strings.HasSuffix(o.name(), "-policies") {
			t.Errorf("a policy ConfigMap %s is rendered with policy objects", o.name())
		}
	}
	volumes, _ := get(dep, "spec", "template", "spec", "volumes").([]any)
	for _, v := range volumes {
		if get(v, "name") == "policies" {
			t.Error("the policies volume is mounted with policy objects")
		}
	}
	env := map[string]any{}
	for _, e := range cp["env"].([]any) {
		env[get(e, "name").(string)] = get(e, "valueFrom", "fieldRef", "fieldPath")
	}
	if env["POD_NAMESPACE"] != "metadata.namespace" || env["POD_NAME"] != "metadata.name" {
		t.Errorf("the control plane's env: %v", env)
	}
	if get(dep, "spec", "template", "spec", "automountServiceAccountToken") != true ||
		get(ms.find(t, "ServiceAccount", "-control-plane"), "automountServiceAccountToken") != true {
		t.Error("the control plane gets no service account token to watch with")
	}
	rules := func(kind, suffix string) string {
		b, _ := sigsyaml.Marshal(get(ms.find(t, kind, suffix), "rules"))
		return string(b)
	}
	if got, want := rules("ClusterRole", "-control-plane"), `- apiGroups:
  - weighstation.io
  resources:
  - limitpolicies
  - gatewaydefaults
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - weighstation.io
  resources:
  - limitpolicies/status
  - gatewaydefaults/status
  verbs:
  - patch
- apiGroups:
  - ""
  resources:
  - events
  verbs:
  - create
  - patch
`; got != want {
		t.Errorf("the control plane's ClusterRole:\n%s", got)
	}
	if got := rules("Role", "-status-lease"); !strings.Contains(got, "weighstation-policy-status") || !strings.Contains(got, "leases") {
		t.Errorf("the Lease Role:\n%s", got)
	}
	// A team edits its LimitPolicies and reads its namespace's Events (why its tenant is
	// refused), nothing more.
	if got, want := rules("ClusterRole", "-limitpolicy-editor"), `- apiGroups:
  - weighstation.io
  resources:
  - limitpolicies
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - ""
  resources:
  - events
  verbs:
  - get
  - list
  - watch
`; got != want {
		t.Errorf("the tenant teams' editor role:\n%s", got)
	}
	for _, b := range []string{"ClusterRoleBinding", "RoleBinding"} {
		sa := get(ms.find(t, b, "-control-plane"+map[string]string{"ClusterRoleBinding": "", "RoleBinding": "-status-lease"}[b]), "subjects", 0, "name")
		if sa != ms.find(t, "ServiceAccount", "-control-plane").name() {
			t.Errorf("%s binds %v, not the control plane's ServiceAccount", b, sa)
		}
	}

	// The CRDs are the generated files, with the keep annotation.
	files, _ := filepath.Glob(filepath.Join(chartDir, "files/crds/*.yaml"))
	rendered := 0
	for _, o := range ms {
		if o.kind() != "CustomResourceDefinition" {
			continue
		}
		rendered++
		if get(o, "metadata", "annotations", "helm.sh/resource-policy") != "keep" {
			t.Errorf("CRD %s is not kept on uninstall", o.name())
		}
		want := readCRD(t, filepath.Join(chartDir, "files/crds", "weighstation.io_"+strings.TrimSuffix(o.name(), ".weighstation.io")+".yaml"))
		gotSpec, _ := sigsyaml.Marshal(get(o, "spec"))
		wantSpec, _ := sigsyaml.Marshal(get(want, "spec"))
		if string(gotSpec) != string(wantSpec) {
			t.Errorf("CRD %s differs from the generated file", o.name())
		}
	}
	if rendered != len(files) || rendered != 2 {
		t.Errorf("%d CRDs rendered of %d generated", rendered, len(files))
	}
	for _, o := range mustRender(t, []string{valueSets(t)["kubernetes-policies"]}, "crds.install=false") {
		if o.kind() == "CustomResourceDefinition" {
			t.Errorf("crds.install=false renders CRD %s", o.name())
		}
	}
	// With policy files there is no RBAC and no token.
	def := mustRender(t, nil)
	if def.has("ClusterRole") || def.has("Role") {
		t.Error("policy files render RBAC the control plane does not use")
	}
	if get(def.find(t, "Deployment", "-control-plane"), "spec", "template", "spec", "automountServiceAccountToken") != false {
		t.Error("policy files mount a service account token the control plane does not use")
	}
}

func readCRD(t *testing.T, path string) object {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var o object
	if err := sigsyaml.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	return o
}
