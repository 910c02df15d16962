package kubesource

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/weighstation/weighstation/control-plane/internal/controller"
	"github.com/weighstation/weighstation/control-plane/internal/policy"
	"github.com/weighstation/weighstation/control-plane/internal/usage"
	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

func TestStatusMailboxKeepsTheNewest(t *testing.T) {
	m := statusMailbox{ready: make(chan struct{}, 1)}
	if m.newer() || m.take() != nil {
		t.Fatal("an empty mailbox has work")
	}
	a, b := &statusWork{}, &statusWork{}
	m.offer(a)
	m.offer(b)
	if !m.newer() {
		t.Fatal("no newer work after an offer")
	}
	if got := m.take(); got != b {
		t.Fatal("take did not return the newest work")
	}
	if m.newer() || m.take() != nil {
		t.Fatal("work left after take")
	}
	select {
	case <-m.ready:
	default:
		t.Fatal("the writer was not woken")
	}
}

// Only an update the evaluation reads wakes a reconcile: a status write's echo does not.
func TestEvaluatedIgnoresStatusWrites(t *testing.T) {
	obj := func(gen, inForce int64, programmed string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"kind": "LimitPolicy",
			"status": map[string]any{"observedGeneration": gen, "conditions": []any{map[string]any{"type": "Programmed", "status": programmed}}}}}
		u.SetUID("u1")
		u.SetGeneration(gen)
		if inForce > 0 {
			_ = unstructured.SetNestedField(u.Object, inForce, "status", "inForce", "generation")
		}
		return u
	}
	if evaluated(obj(2, 0, "False")) != evaluated(obj(2, 0, "True")) {
		t.Error("a condition's change counts as evaluated")
	}
	if evaluated(obj(2, 0, "True")) == evaluated(obj(3, 0, "True")) {
		t.Error("a new generation does not count")
	}
	if evaluated(obj(3, 0, "True")) == evaluated(obj(3, 2, "True")) {
		t.Error("status.inForce does not count")
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(*policy.Set, string) error { return nil }

// A reconcile publishes the set without waiting for status writes, however slow they are: the
// writer writes them beside it, and leaves off for a newer reconcile's work.
func TestReconcileDoesNotWaitForStatusWrites(t *testing.T) {
	const ns = "weighstation"
	mk := func(kind, ns, name, uid, spec string) *unstructured.Unstructured {
		o := mkObject(kind, ns, name, 1, 0, spec)
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "weighstation.io/v1alpha1", "kind": kind, "spec": o.Spec}}
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetUID(types.UID(uid))
		u.SetGeneration(1)
		u.SetCreationTimestamp(metav1.NewTime(epoch))
		return u
	}
	defaults := mk("GatewayDefaults", "", "default", "d", "defaultTenant: t0")
	var policies []*unstructured.Unstructured
	for _, name := range []string{"t0", "t1", "t2"} {
		policies = append(policies, mk("LimitPolicy", ns, name, "p"+name, "tenant: "+name+"\nidentify: {nats: {users: ["+name+"]}}"))
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		LimitPolicies: "LimitPolicyList", GatewayDefaults: "GatewayDefaultsList"})
	release := make(chan struct{})
	var mu sync.Mutex
	patched := 0
	client.PrependReactor("patch", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release // an API server that takes its time (or a rate limiter's queue)
		mu.Lock()
		patched++
		mu.Unlock()
		return true, &unstructured.Unstructured{}, nil
	})
	ctrl := controller.New("", nopPublisher{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s := &Source{cfg: Config{PlatformNamespace: ns, Controller: ctrl, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Gateways: func(context.Context) ([]xds.NodeStatus, error) { return nil, nil }},
		client: client, eval: newEvaluator(ns), wake: make(chan struct{}, 1), held: map[string]*holding{}, told: map[string]*told{},
		status: statusMailbox{ready: make(chan struct{}, 1)}}
	s.leader.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.writeStatusLoop(ctx); close(done) }()
	defer func() { cancel(); close(release); <-done }()

	list := func(us ...*unstructured.Unstructured) []any {
		out := make([]any, len(us))
		for i, u := range us {
			out[i] = u
		}
		return out
	}
	reconciled := make(chan struct{})
	go func() {
		s.reconcile(ctx, list(defaults), list(policies...))
		// The writer is now held in its first patch; a change of the set is published anyway.
		time.Sleep(50 * time.Millisecond)
		s.reconcile(ctx, list(defaults), list(policies[:2]...))
		close(reconciled)
	}()
	select {
	case <-reconciled:
	case <-time.After(5 * time.Second):
		t.Fatal("a reconcile waited for a status write")
	}
	if v := ctrl.ActiveVersion(); v == "" || s.held["LimitPolicy "+ns+"/t2"] != nil || s.held["LimitPolicy "+ns+"/t1"] == nil {
		t.Fatalf("the second reconcile's set is not the one in force (version %q)", v)
	}
	// The writer leaves the first reconcile's work for the second's: once released, it patches
	// at most one object of the first (the one it was held in) and then the second's three
	// (the defaults, t0 and t1), not t2.
	release <- struct{}{}
	for range 3 {
		select {
		case release <- struct{}{}:
		case <-time.After(5 * time.Second):
			mu.Lock()
			t.Fatalf("the writer stopped after %d patches", patched)
		}
	}
	select {
	case release <- struct{}{}:
		t.Fatal("the writer wrote the status of the first reconcile's objects after the second's")
	case <-time.After(200 * time.Millisecond):
	}
}

// The informer keeps neither managedFields nor kubectl's copy of the applied object; the rest
// of the metadata, the spec and the status stay.
func TestSlim(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"kind": "LimitPolicy", "spec": map[string]any{"tenant": "a"},
		"status": map[string]any{"observedGeneration": int64(1)}}}
	u.SetName("a")
	u.SetGeneration(1)
	u.SetAnnotations(map[string]string{lastApplied: `{"spec":{}}`, "team": "x"})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
	out, err := slim(u)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*unstructured.Unstructured)
	if len(s.GetManagedFields()) != 0 || s.GetAnnotations()[lastApplied] != "" {
		t.Fatalf("managedFields or the last-applied annotation kept: %v", s.Object["metadata"])
	}
	if s.GetAnnotations()["team"] != "x" || s.GetName() != "a" || s.GetGeneration() != 1 || fromUnstructured(s).Spec["tenant"] != "a" {
		t.Fatalf("more dropped than meant: %v", s.Object)
	}
	if g, _, _ := unstructured.NestedInt64(s.Object, "status", "observedGeneration"); g != 1 {
		t.Fatal("status dropped")
	}
}

// A LimitPolicy's usage is written once its tenant has traffic, or when it showed some before
// (now gone); an idle tenant whose object shows none is not written at all.
func TestUsageIsWrittenWhenThereIsSomethingToTell(t *testing.T) {
	mk := func(name string, withUsage bool) usageTarget {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "weighstation.io/v1alpha1", "kind": "LimitPolicy"}}
		u.SetNamespace("team-a")
		u.SetName(name)
		u.SetUID(types.UID(name))
		if withUsage {
			_ = unstructured.SetNestedMap(u.Object, map[string]any{"admitted": int64(3)}, "status", "usage")
		}
		return usageTarget{obj: u, tenant: name}
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		LimitPolicies: "LimitPolicyList", GatewayDefaults: "GatewayDefaultsList"})
	var patched []string
	client.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patched = append(patched, a.(k8stesting.PatchAction).GetName())
		return true, &unstructured.Unstructured{}, nil
	})
	busy := map[string]bool{"busy": true}
	s := &Source{client: client, told: map[string]*told{}, cfg: Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Usage: func(tenant string, _ time.Time) usage.Summary {
			if busy[tenant] {
				return usage.Summary{Admitted: 5}
			}
			return usage.Summary{Refused: map[string]uint64{"rate": 0}}
		}}}
	targets := []usageTarget{mk("idle", false), mk("busy", false), mk("quiet-now", true)}
	s.tellUsage(context.Background(), targets, epoch, func() bool { return false })
	if fmt.Sprint(patched) != "[busy quiet-now]" {
		t.Errorf("usage written to %v, want busy's and quiet-now's", patched)
	}
	busy["idle"] = true
	s.tellUsage(context.Background(), targets, epoch.Add(usageEvery), func() bool { return false })
	if fmt.Sprint(patched) != "[busy quiet-now idle]" {
		t.Errorf("usage written to %v, then idle's once it had traffic", patched)
	}
}
