// Package kubesource makes LimitPolicy and GatewayDefaults objects of the Kubernetes API the
// control plane's policy source (`weighstation serve --policy-source=kubernetes`): it watches
// them through client-go informers, decides per object whether it is in force, publishes the
// set, and reports each object's Accepted and Programmed conditions on its status.
package kubesource

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// The resources of the two kinds.
var (
	LimitPolicies   = schema.GroupVersionResource{Group: "weighstation.io", Version: "v1alpha1", Resource: "limitpolicies"}
	GatewayDefaults = schema.GroupVersionResource{Group: "weighstation.io", Version: "v1alpha1", Resource: "gatewaydefaults"}
)

// object is what the evaluation needs of one stored object.
type object struct {
	Kind       string
	Namespace  string // "" for the cluster-scoped GatewayDefaults
	Name       string
	UID        string
	Generation int64
	Created    time.Time
	Spec       map[string]any
	// InForce is the earlier generation the status says is in force (see verdict.Earlier).
	InForce *accepted
}

func fromUnstructured(u *unstructured.Unstructured) object {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	o := object{
		Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID()),
		Generation: u.GetGeneration(), Created: u.GetCreationTimestamp().Time, Spec: spec,
	}
	gen, _, _ := unstructured.NestedInt64(u.Object, "status", "inForce", "generation")
	if earlier, ok, _ := unstructured.NestedMap(u.Object, "status", "inForce", "spec"); ok && gen > 0 && gen < o.Generation {
		o.InForce = &accepted{UID: o.UID, Generation: gen, Spec: earlier}
	}
	return o
}

// slim drops from an object what the control plane never reads before the informer caches it:
// its managedFields and kubectl's last-applied-configuration annotation (a copy of the object
// as applied) are most of a small LimitPolicy's size, times 10,000 objects.
func slim(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
		if a := u.GetAnnotations(); a[lastApplied] != "" {
			delete(a, lastApplied)
			u.SetAnnotations(a)
		}
	}
	return obj, nil
}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// ref names the object in errors and logs: "LimitPolicy team-a/acme", "GatewayDefaults default".
func (o object) ref() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// render makes an object's spec a policy file document, which internal/policy decodes with
// the same rules as files.
func render(kind, name string, spec map[string]any) []byte {
	b, _ := yaml.Marshal(map[string]any{
		"apiVersion": policy.APIVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	})
	return b
}

// oldestFirst orders objects as the API server received them: on a conflict, the one that was
// there first keeps its tenant and identities.
func oldestFirst(objs []object) {
	sort.SliceStable(objs, func(i, j int) bool {
		a, b := objs[i], objs[j]
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// contentHash identifies a set by the documents in force.
func contentHash(docs map[string][]byte) string {
	refs := make([]string, 0, len(docs))
	for r := range docs {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	h := sha256.New()
	for _, r := range refs {
		h.Write([]byte(r))
		h.Write([]byte{0})
		h.Write(docs[r])
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
