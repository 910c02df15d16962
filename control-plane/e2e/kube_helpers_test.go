package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/weighstation/weighstation/control-plane/internal/apiserver"
	"github.com/weighstation/weighstation/control-plane/internal/kubesource"
)

var (
	lpGVR  = kubesource.LimitPolicies
	gwdGVR = kubesource.GatewayDefaults
	crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

func dynamicClient(t *testing.T, kubeconfig string) dynamic.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// Not client-go's default 5 requests/s: the test polls status, and a throttled poll would
	// be measured as the control plane's delay.
	cfg.QPS, cfg.Burst = 200, 400
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// obj parses a YAML manifest.
func obj(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &m); err != nil {
		t.Fatalf("%v\n%s", err, manifest)
	}
	b, _ := json.Marshal(m)
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return u
}

// apply creates the object, or replaces the spec of the stored one, as kubectl apply would,
// with strict field validation (kubectl's default).
func apply(c dynamic.Interface, gvr schema.GroupVersionResource, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := resource(c, gvr, u.GetNamespace())
	var out *unstructured.Unstructured
	// A control plane may write the object's status between the read and the update (a
	// conflict): read it again, as kubectl apply does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := r.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			out, err = r.Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
			return err
		}
		cur.Object["spec"] = u.Object["spec"]
		out, err = r.Update(ctx, cur, metav1.UpdateOptions{FieldValidation: "Strict"})
		return err
	})
	return out, err
}

func resource(c dynamic.Interface, gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return c.Resource(gvr)
	}
	return c.Resource(gvr).Namespace(ns)
}

func mustApply(t *testing.T, c dynamic.Interface, gvr schema.GroupVersionResource, manifest string) *unstructured.Unstructured {
	t.Helper()
	u, err := apply(c, gvr, obj(t, manifest))
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, manifest)
	}
	return u
}

func deleteObject(t *testing.T, c dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	if err := resource(c, gvr, ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// conditionsOf reads an object's status as the API server stores it.
func conditionsOf(t *testing.T, c dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) (generation, observed int64, conds []metav1.Condition) {
	t.Helper()
	u, err := resource(c, gvr, ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		ObservedGeneration int64              `json:"observedGeneration"`
		Conditions         []metav1.Condition `json:"conditions"`
	}
	if raw, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &st)
	}
	return u.GetGeneration(), st.ObservedGeneration, st.Conditions
}

// waitCondition waits until the object's current generation has the condition with status and
// reason (and, if given, a message containing msg); it returns how long that took.
func waitCondition(t *testing.T, c dynamic.Interface, gvr schema.GroupVersionResource, ns, name, typ string, status metav1.ConditionStatus, reason, msg string, timeout time.Duration) (time.Duration, metav1.Condition) {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < timeout {
		gen, observed, conds := conditionsOf(t, c, gvr, ns, name)
		if cond := meta.FindStatusCondition(conds, typ); cond != nil {
			last = fmt.Sprintf("generation %d, observed %d: %s=%s %s %q (of generation %d)", gen, observed, typ, cond.Status, cond.Reason, cond.Message, cond.ObservedGeneration)
			if observed == gen && cond.ObservedGeneration == gen && cond.Status == status && cond.Reason == reason && strings.Contains(cond.Message, msg) {
				return time.Since(start), *cond
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s %s/%s: no %s=%s %s %q within %s; last: %s", gvr.Resource, ns, name, typ, status, reason, msg, timeout, last)
	return 0, metav1.Condition{}
}

// installCRDs creates the chart's CRDs and waits until they are established.
func installCRDs(t *testing.T, c dynamic.Interface) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "helm/weighstation/files/crds/*.yaml"))
	if len(files) != 2 {
		t.Fatalf("want the 2 CRDs of helm/weighstation/files/crds, found %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := obj(t, string(b))
		if _, err := c.Resource(crdGVR).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := c.Resource(crdGVR).Get(context.Background(), u.GetName(), metav1.GetOptions{})
			if err == nil && established(got) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CRD %s not established", u.GetName())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// table is what `kubectl get` prints: the API server's Table rendering of the printer columns.
func (k *k8sStack) table(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", k.api.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+apiserver.AdminToken)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tbl metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&tbl); err != nil {
		t.Fatal(err)
	}
	rows := [][]string{{"NAMESPACE"}}
	for _, c := range tbl.ColumnDefinitions {
		rows[0] = append(rows[0], strings.ToUpper(c.Name))
	}
	for _, r := range tbl.Rows {
		var m struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		_ = json.Unmarshal(r.Object.Raw, &m)
		row := []string{m.Metadata.Namespace}
		for _, cell := range r.Cells {
			if cell == nil {
				cell = "<none>" // as kubectl prints a field the object leaves out
			}
			row = append(row, fmt.Sprint(cell))
		}
		rows = append(rows, row)
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			fmt.Fprintf(&b, "%-*s   ", widths[i], c)
		}
		b.WriteString("\n")
	}
	return b.String()
}
