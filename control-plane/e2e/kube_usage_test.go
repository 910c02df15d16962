package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nats-io/nats.go"
)

// k8sAcmeClients is team-a's policy with client limits: 5 messages/s for each client of acme.
const k8sAcmeClients = `
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: {name: acme, namespace: team-a}
spec:
  tenant: acme
  identify: {nats: {users: [k8s-acme]}}
  onLimit: reject
  limits:
    rate: {messagesPerSecond: 1000}
  clients:
    default: {rate: {messagesPerSecond: 5}}
`

// editorClient is a ServiceAccount of team-a bound in team-a to the chart's LimitPolicy editor
// ClusterRole: what a tenant team is given.
// It returns a client and the kubeconfig.
func editorClient(t *testing.T, k *k8sStack) (kubernetes.Interface, string) {
	t.Helper()
	role := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "gw-weighstation-control-plane-limitpolicy-editor"}
	kubeconfig := boundServiceAccount(t, k, "team-a", "editor", role)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg), kubeconfig
}

// usageOf reads a LimitPolicy's status.usage (nil: none).
func usageOf(u *unstructured.Unstructured) map[string]any {
	m, _, _ := unstructured.NestedMap(u.Object, "status", "usage")
	return m
}

// The tenant team sees its limits at work on its own LimitPolicy: status.usage sums the last
// minute (admitted, refused by reason, the clients refused most), written at most every 10 s; an
// Event says when refusals start (counted again every 10 s while they go on, as the team's
// `kubectl describe` shows it) and when they stop; the chart's editor role reads its own
// namespace's Events and not another's; another team's policy shows nothing of it.
func testTeamSeesItsLimitsAtWork(t *testing.T, k *k8sStack) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := k.admin
	applied := mustApply(t, a, lpGVR, k8sAcmeClients)
	waitCondition(t, a, lpGVR, "team-a", "acme", "Programmed", metav1.ConditionTrue, "Programmed", "1/1 gateways", 5*time.Second)
	// Every status write of the test's span, seen as it happens.
	w, err := resource(a, lpGVR, "team-a").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=acme", ResourceVersion: applied.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	writes := make(chan time.Time, 100)
	go func() {
		last := ""
		for e := range w.ResultChan() {
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok || e.Type != watch.Modified {
				continue
			}
			if until, _ := usageOf(u)["until"].(string); until != "" && until != last {
				last = until
				if at, err := time.Parse(time.RFC3339, until); err == nil {
					writes <- at
				}
			}
		}
		close(writes)
	}()

	// A control plane counts what a gateway worker reports from its second report on (counters
	// are cumulative since the worker started, and the first one a restarted control plane gets
	// cannot say which part is new): the previous subtests restarted it.
	eventually(t, 10*time.Second, "the restarted control plane has a report of the gateway's", func() bool {
		resp, err := http.Get("http://" + addr(k.ports.ControlPlane) + "/usage")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var doc struct {
			Tenants []json.RawMessage `json:"tenants"`
		}
		return json.NewDecoder(resp.Body).Decode(&doc) == nil && len(doc.Tenants) > 0
	})
	// Programmed says the gateway acknowledged the policy; each worker applies it a moment
	// later. billing-a's new connections are refused once it is in force there.
	var refusals atomic.Int64
	var noisy *nats.Conn
	eventually(t, 10*time.Second, "acme's client limit refusing billing-a's new connection", func() bool {
		noisy = connectNATS(t, k.ports.NATS, "k8s-acme", "k8s-acme-secret", nats.Name("billing-a"),
			nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) { refusals.Add(1) }))
		for i := range 20 {
			_ = noisy.Publish("acme.usage", []byte(fmt.Sprint(i)))
		}
		_ = noisy.Flush()
		time.Sleep(100 * time.Millisecond) // the -ERRs follow the PONG
		return refusals.Load() > 0
	})
	quiet := connectNATS(t, k.ports.NATS, "k8s-acme", "k8s-acme-secret", nats.Name("billing-b"))
	_ = quiet.Publish("acme.usage", []byte("b"))
	if err := quiet.Flush(); err != nil {
		t.Fatal(err)
	}
	// billing-a bursts once a second until the status shows it (a burst the gateway worker
	// reported to a control plane that had no report of it before is not counted; see above).
	var refusedAt, burstAt time.Time
	burst := func() {
		if time.Since(burstAt) < time.Second {
			return
		}
		for i := range 100 {
			_ = noisy.Publish("acme.usage", []byte(fmt.Sprint(i)))
		}
		if err := noisy.Flush(); err != nil {
			t.Fatal(err)
		}
		burstAt, refusedAt = time.Now(), time.Now()
	}

	var u *unstructured.Unstructured
	defer func() {
		if t.Failed() && u != nil {
			t.Logf("acme's status: %v", u.Object["status"])
			if st, err := k.stack.ControlPlaneStatus(); err == nil {
				t.Logf("control plane: %+v", st.Active)
			}
			if resp, err := http.Get("http://" + addr(k.ports.ControlPlane) + "/usage/history?since=3m&resolution=1s&format=json"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Logf("/usage/history: %s", b)
			}
			if resp, err := http.Get("http://" + addr(k.ports.ControlPlane) + "/usage"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Logf("/usage: %s", b)
			}
		}
	}()
	eventually(t, 25*time.Second, "acme's status.usage shows billing-a refused", func() bool {
		burst()
		u, err = resource(a, lpGVR, "team-a").Get(ctx, "acme", metav1.GetOptions{})
		if err != nil {
			return false
		}
		usage := usageOf(u)
		top, _ := usage["topClients"].([]any)
		refused, _ := usage["refused"].(map[string]any)
		first, _ := firstOf(top)["client"].(string)
		return first == "billing-a" && refused["rate"] != nil
	})
	usage := usageOf(u)
	t.Logf("status.usage: %v", usage)
	if admitted, _ := usage["admitted"].(int64); admitted < 6 {
		t.Errorf("status.usage.admitted %v: want billing-a's burst and billing-b's message", usage["admitted"])
	}
	refused, _ := usage["refused"].(map[string]any)
	if n, _ := refused["rate"].(int64); n < 90 {
		t.Errorf("status.usage.refused.rate %v: want billing-a's ~95 refusals", refused["rate"])
	}
	for _, c := range usage["topClients"].([]any) {
		if c.(map[string]any)["client"] == "billing-b" {
			t.Errorf("billing-b, never refused, is among the top clients: %v", usage["topClients"])
		}
	}

	editor, editorKubeconfig := editorClient(t, k)
	eventsOf := func(reason string) []corev1.Event {
		list, err := editor.CoreV1().Events("team-a").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=LimitPolicy,involvedObject.name=acme,involvedObject.uid=" + string(u.GetUID()) + ",reason=" + reason})
		if err != nil {
			t.Fatalf("the team's editor role lists its namespace's events: %v", err)
		}
		return list.Items
	}
	var refusing []corev1.Event
	eventually(t, 10*time.Second, "a Refusing Event on acme", func() bool {
		refusing = eventsOf("Refusing")
		return len(refusing) > 0
	})
	if e := refusing[0]; e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "rate") || !strings.Contains(e.Message, "top client billing-a") {
		t.Errorf("the Refusing Event: %s %q, want a Warning naming rate and top client billing-a", e.Type, e.Message)
	}
	t.Logf("Event %s: %s", refusing[0].Reason, refusing[0].Message)
	if _, err := editor.CoreV1().Events("team-b").List(ctx, metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("the team's editor role listing team-b's events: want forbidden, got %v", err)
	}
	globex, err := resource(a, lpGVR, "team-b").Get(ctx, "globex", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g := usageOf(globex); strings.Contains(fmt.Sprint(g), "billing") || g["refused"] != nil && len(g["refused"].(map[string]any)) > 0 {
		t.Errorf("globex's status shows acme's traffic: %v", g)
	}

	// While the last minute has refusals, the Refusing Event is told again every 10 s: counted
	// on the Event of its minute, as the team's kubectl describe shows it.
	var described string
	eventually(t, 30*time.Second, "kubectl describe shows the Refusing Event counted again", func() bool {
		out, err := exec.Command(filepath.Join(root, ".tools/k8s/bin/kubectl"), "--kubeconfig", editorKubeconfig,
			"describe", "limitpolicy", "acme", "-n", "team-a").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl describe limitpolicy acme as the team's editor: %v\n%s", err, out)
		}
		described = string(out)
		return regexp.MustCompile(`Warning\s+Refusing\s+\S+ \(x[2-9]\d* over \S+\)\s+weighstation-control-plane\s+Refusing rate \d+ in the last minute, top client billing-a`).MatchString(described)
	})
	t.Logf("kubectl describe limitpolicy acme -n team-a (as the team's editor):\n%s", described[strings.Index(described, "Events:"):])

	// A minute after the last refusal, the refusals have stopped: Recovered.
	eventually(t, 90*time.Second-time.Since(refusedAt), "a Recovered Event on acme", func() bool { return len(eventsOf("Recovered")) > 0 })
	t.Logf("Recovered %s after the last refusal", time.Since(refusedAt).Round(time.Second))
	// At most one new Refusing Event per minute; the tells within its minute are its count.
	refusing = eventsOf("Refusing")
	sort.Slice(refusing, func(i, j int) bool { return refusing[i].FirstTimestamp.Before(&refusing[j].FirstTimestamp) })
	var counts []int32
	for i, e := range refusing {
		counts = append(counts, e.Count)
		if i > 0 && e.FirstTimestamp.Sub(refusing[i-1].FirstTimestamp.Time) < time.Minute {
			t.Errorf("Refusing Events made %s apart: want at most one new Event a minute", e.FirstTimestamp.Sub(refusing[i-1].FirstTimestamp.Time))
		}
	}
	t.Logf("Refusing Events of the episode, by count: %v", counts)
	if len(refusing) == 0 || counts[0] < 2 {
		t.Errorf("Refusing Events %v: want the first counted again while the refusals went on", counts)
	}
	cancel()
	var prev time.Time
	count := 0
	for at := range writes {
		// until is written to the second: two writes 10 s apart may read 9 s apart.
		if !prev.IsZero() && at.Sub(prev) < 9*time.Second {
			t.Errorf("status.usage written %s after the previous write: want at most one write every 10 s", at.Sub(prev))
		}
		prev = at
		count++
	}
	t.Logf("status.usage written %d times in %s", count, time.Since(refusedAt).Round(time.Second))
	if count == 0 {
		t.Error("the watch saw no status.usage write")
	}
}

func firstOf(l []any) map[string]any {
	if len(l) == 0 {
		return nil
	}
	m, _ := l[0].(map[string]any)
	return m
}
