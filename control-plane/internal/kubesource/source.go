package kubesource

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/weighstation/weighstation/control-plane/internal/controller"
	"github.com/weighstation/weighstation/control-plane/internal/usage"
	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// Config is what a Source needs.
type Config struct {
	REST *rest.Config
	// PlatformNamespace is the control plane's own: its LimitPolicies need no grant, and the
	// status Lease lives there.
	PlatformNamespace string
	Identity          string // this replica's name in the Lease
	Election          Election
	Controller        *controller.Controller
	// Gateways lists every gateway connected to any replica (see Fleet); an error says some
	// replicas' gateways are missing.
	Gateways func(ctx context.Context) ([]xds.NodeStatus, error)
	// Usage is a tenant's last minute (usage.Book.Summary), for its LimitPolicy's status and
	// Events; nil: none are written.
	Usage func(tenant string, now time.Time) usage.Summary
	Log   *slog.Logger
}

// Source watches the policy objects and keeps the controller's set and the objects' status
// current. Every replica publishes what it computes to the gateways connected to it; only the
// replica holding the Lease writes status.
type Source struct {
	cfg    Config
	client dynamic.Interface
	kube   kubernetes.Interface
	eval   *evaluator
	wake   chan struct{}
	leader atomic.Bool
	// held is, per object, the generation in force and the content hashes of the published
	// sets that hold it.
	held map[string]*holding
	// told is, per LimitPolicy, what its status and Events last said of its usage (the status
	// writer's alone).
	told map[string]*told
	// status is what the status writer is to write next (statuswriter.go).
	status statusMailbox
}

type holding struct {
	uid        string
	generation int64
	hashes     []string // newest last, at most maxHeld
}

// maxHeld bounds the sets remembered per object generation: gateways acknowledge one of the
// last few.
const maxHeld = 32

func New(cfg Config) (*Source, error) {
	client, err := dynamic.NewForConfig(cfg.REST)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg.REST)
	if err != nil {
		return nil, err
	}
	return &Source{cfg: cfg, client: client, kube: kube, eval: newEvaluator(cfg.PlatformNamespace),
		wake: make(chan struct{}, 1), held: map[string]*holding{}, told: map[string]*told{},
		status: statusMailbox{ready: make(chan struct{}, 1)}}, nil
}

// Wake asks for a reconcile soon: an object changed, or a gateway acknowledged or refused.
func (s *Source) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run watches until ctx ends.
func (s *Source) Run(ctx context.Context) error {
	factory := dynamicinformer.NewDynamicSharedInformerFactory(s.client, 0)
	informers := map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	for _, gvr := range []schema.GroupVersionResource{LimitPolicies, GatewayDefaults} {
		inf := factory.ForResource(gvr).Informer()
		if err := inf.SetTransform(slim); err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { s.Wake() },
			// Not the echo of a status write (this replica's own, at up to 50 a second while
			// thousands of objects are new): the tick reconciles those.
			UpdateFunc: func(old, cur any) {
				if evaluated(old) != evaluated(cur) {
					s.Wake()
				}
			},
			DeleteFunc: func(any) { s.Wake() },
		}); err != nil {
			return err
		}
		informers[gvr] = inf
	}
	factory.Start(ctx.Done())
	s.cfg.Log.Info("watching policy objects", "kinds", "LimitPolicy, GatewayDefaults", "platformNamespace", s.cfg.PlatformNamespace)
	if !cache.WaitForCacheSync(ctx.Done(), informers[LimitPolicies].HasSynced, informers[GatewayDefaults].HasSynced) {
		return ctx.Err()
	}
	elected := make(chan struct{})
	go func() { s.elect(ctx); close(elected) }()
	defer func() { <-elected }() // a stopping replica releases the Lease before it exits
	// Status is written beside the reconciles, never in their way: at 50 writes a second,
	// 10,000 new objects' status takes minutes, and a policy change must not wait behind it.
	written := make(chan struct{})
	go func() { s.writeStatusLoop(ctx); close(written) }()
	defer func() { <-written }()
	// The tick notices gateways that went away (and retries status a failed write left stale).
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.reconcile(ctx, informers[GatewayDefaults].GetStore().List(), informers[LimitPolicies].GetStore().List())
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			time.Sleep(20 * time.Millisecond) // one reconcile for a burst of events
		case <-tick.C:
		}
	}
}

func (s *Source) reconcile(ctx context.Context, defaults, policies []any) {
	stored := map[string]*unstructured.Unstructured{}
	objs := func(list []any) []object {
		out := make([]object, 0, len(list))
		for _, item := range list {
			u, ok := item.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			o := fromUnstructured(u)
			stored[o.ref()] = u
			out = append(out, o)
		}
		return out
	}
	ev := s.eval.evaluate(objs(defaults), objs(policies))
	if err := s.cfg.Controller.Apply(ev.Set, ev.Err); err == nil && ev.Set != nil {
		hash := contentOf(s.cfg.Controller.ActiveVersion())
		for ref, v := range ev.Verdicts {
			if v.InForce == 0 {
				continue
			}
			uid := string(stored[ref].GetUID())
			h := s.held[ref]
			if h == nil || h.uid != uid || h.generation != v.InForce {
				h = &holding{uid: uid, generation: v.InForce}
				s.held[ref] = h
			}
			if !slices.Contains(h.hashes, hash) {
				h.hashes = append(h.hashes, hash)
				if len(h.hashes) > maxHeld {
					h.hashes = h.hashes[1:]
				}
			}
		}
	}
	for ref := range s.held {
		if _, ok := ev.Verdicts[ref]; !ok {
			delete(s.held, ref)
		}
	}
	if !s.leader.Load() {
		return
	}
	held := make(map[string]holding, len(s.held))
	for ref, h := range s.held {
		held[ref] = holding{uid: h.uid, generation: h.generation, hashes: slices.Clone(h.hashes)}
	}
	s.status.offer(&statusWork{ev: ev, stored: stored, held: held})
}

// writeStatus patches the object's status when its conditions or the earlier generation it
// keeps in force differ from want; a condition whose status is unchanged keeps its
// lastTransitionTime.
func (s *Source) writeStatus(ctx context.Context, u *unstructured.Unstructured, want []metav1.Condition, earlier *accepted) {
	var current struct {
		ObservedGeneration int64              `json:"observedGeneration"`
		Conditions         []metav1.Condition `json:"conditions"`
		InForce            *struct {
			Generation int64 `json:"generation"`
		} `json:"inForce"`
	}
	if raw, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &current)
	}
	changed := current.ObservedGeneration != u.GetGeneration()
	conditions := current.Conditions
	for _, c := range want {
		c.Message = bounded(c.Message)
		old := meta.FindStatusCondition(conditions, c.Type)
		if old == nil || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message || old.ObservedGeneration != c.ObservedGeneration {
			changed = true
			meta.SetStatusCondition(&conditions, c)
		}
	}
	var inForce any // null removes it
	if earlier != nil {
		inForce = map[string]any{"generation": earlier.Generation, "spec": earlier.Spec}
		changed = changed || current.InForce == nil || current.InForce.Generation != earlier.Generation
	} else {
		changed = changed || current.InForce != nil
	}
	if !changed {
		return
	}
	body, _ := json.Marshal(map[string]any{"status": map[string]any{"observedGeneration": u.GetGeneration(), "conditions": conditions, "inForce": inForce}})
	gvr := LimitPolicies
	if u.GetKind() == "GatewayDefaults" {
		gvr = GatewayDefaults
	}
	var err error
	if ns := u.GetNamespace(); ns != "" {
		_, err = s.client.Resource(gvr).Namespace(ns).Patch(ctx, u.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: "weighstation"}, "status")
	} else {
		_, err = s.client.Resource(gvr).Patch(ctx, u.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: "weighstation"}, "status")
	}
	if err != nil && ctx.Err() == nil {
		s.cfg.Log.Warn("writing policy status", "object", fromUnstructured(u).ref(), "err", err)
	}
}

// maxMessage keeps a condition's message within what the CRD admits (32768 characters): a
// longer one would have every status write refused.
const maxMessage = 4096

func bounded(m string) string {
	if len(m) <= maxMessage {
		return m
	}
	return m[:maxMessage-len(" …")] + " …"
}
