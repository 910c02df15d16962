package kubesource

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// statusWork is what one reconcile found: the verdict on each object, the objects as stored,
// and the published sets holding each object's generation in force.
type statusWork struct {
	ev     evaluation
	stored map[string]*unstructured.Unstructured
	held   map[string]holding
}

// statusMailbox hands the status writer the newest reconcile's work: a newer one replaces one
// not yet taken, and tells the writer to leave the one it is writing (what it has not written
// yet, the newer one says again, newer).
type statusMailbox struct {
	mu    sync.Mutex
	next  *statusWork
	ready chan struct{} // capacity 1
}

func (m *statusMailbox) offer(w *statusWork) {
	m.mu.Lock()
	m.next = w
	m.mu.Unlock()
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

func (m *statusMailbox) take() *statusWork {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.next
	m.next = nil
	return w
}

// newer says whether a reconcile offered work since the last take.
func (m *statusMailbox) newer() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next != nil
}

// writeStatusLoop writes the status of what the reconciles offer, the newest first, until ctx
// ends. The writes are rate limited (the client's QPS), so the reconciles, which publish
// policy changes, never wait for them.
func (s *Source) writeStatusLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.status.ready:
		}
		if w := s.status.take(); w != nil && s.leader.Load() {
			s.writeAll(ctx, w)
		}
	}
}

// writeAll writes each object's conditions that differ from its stored status, then the usage
// of those in force; it leaves off when a newer reconcile's work is waiting or this replica
// stops leading.
func (s *Source) writeAll(ctx context.Context, w *statusWork) {
	stop := func() bool { return ctx.Err() != nil || s.status.newer() || !s.leader.Load() }
	nodes, partial := s.cfg.Gateways(ctx)
	for ref, v := range w.ev.Verdicts {
		if stop() {
			return
		}
		u := w.stored[ref]
		var held []string
		if h, ok := w.held[ref]; ok && h.uid == string(u.GetUID()) && h.generation == v.InForce {
			held = h.hashes
		}
		prog := programmed(v, held, nodes, v.Generation)
		if partial != nil && prog.Status == metav1.ConditionTrue {
			// Not every gateway is known: a refusal on another replica's could be missing.
			prog.Status, prog.Reason = metav1.ConditionFalse, ReasonPending
			prog.Message += " of this replica's; the other replicas could not be listed: " + partial.Error()
		}
		s.writeStatus(ctx, u, []metav1.Condition{acceptedCondition(v), prog}, v.Earlier)
	}
	s.tellUsage(ctx, usageTargets(w.ev, w.stored), time.Now(), stop)
}

// evaluated is what the evaluation reads of a stored object beyond its spec, which moves its
// generation: an update that changes none of it (a status write) needs no reconcile.
func evaluated(obj any) evaluatedFields {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return evaluatedFields{}
	}
	f := evaluatedFields{uid: string(u.GetUID()), generation: u.GetGeneration()}
	f.inForce, _, _ = unstructured.NestedInt64(u.Object, "status", "inForce", "generation")
	return f
}

type evaluatedFields struct {
	uid                 string
	generation, inForce int64
}
