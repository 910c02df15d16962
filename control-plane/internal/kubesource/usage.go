package kubesource

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/weighstation/weighstation/control-plane/internal/usage"
)

// A LimitPolicy's status.usage is written at most this often, and only when it changed.
const usageEvery = 10 * time.Second

// A LimitPolicy gets at most one new Event per reason in this long; a repeat within it counts
// on the Event already made (as the kubelet aggregates its events).
const eventEvery = time.Minute

// While a tenant is refused, its LimitPolicy's Refusing Event is told again this often, with the
// last minute's figures: `kubectl describe` shows it counted (x6 over 50s) and current.
const refusingEvery = usageEvery

// told is what a LimitPolicy's status and Events last said of its tenant's usage.
type told struct {
	uid      string
	written  time.Time
	summary  usage.Summary
	refusing bool
	// refusingTold is when the Refusing Event was last told.
	refusingTold time.Time
	events       map[string]*sentEvent // by reason
}

type sentEvent struct {
	name  string
	first time.Time
	count int32
}

// usageTarget is a LimitPolicy in force and the tenant it defines (the earlier generation's,
// while that one is in force).
type usageTarget struct {
	obj    *unstructured.Unstructured
	tenant string
}

// usageTargets lists the LimitPolicies in force: only they show a tenant's usage, so no object
// that is Conflicted or NotPermitted learns another namespace's traffic.
func usageTargets(ev evaluation, stored map[string]*unstructured.Unstructured) []usageTarget {
	var out []usageTarget
	for ref, v := range ev.Verdicts {
		u := stored[ref]
		if u == nil || u.GetKind() != "LimitPolicy" || v.InForce == 0 {
			continue
		}
		spec := fromUnstructured(u).Spec
		if v.Earlier != nil {
			spec = v.Earlier.Spec
		}
		if tenant, _ := spec["tenant"].(string); tenant != "" {
			out = append(out, usageTarget{u, tenant})
		}
	}
	return out
}

// tellUsage writes each LimitPolicy in force its tenant's last minute, and an Event when its
// refusals start ("Refusing", told again every refusingEvery while they go on) and stop
// ("Recovered"). It leaves off when stop says so.
func (s *Source) tellUsage(ctx context.Context, targets []usageTarget, now time.Time, stop func() bool) {
	if s.cfg.Usage == nil {
		return
	}
	seen := map[string]bool{}
	for _, t := range targets {
		if stop() {
			return // before forgetting those not seen
		}
		ref := fromUnstructured(t.obj).ref()
		seen[ref] = true
		st := s.told[ref]
		if st == nil || st.uid != string(t.obj.GetUID()) {
			st = &told{uid: string(t.obj.GetUID()), events: map[string]*sentEvent{}}
			s.told[ref] = st
		}
		sum := s.cfg.Usage(t.tenant, now)
		s.tellRefusals(ctx, t.obj, st, sum, now)
		if now.Sub(st.written) < usageEvery || (!st.written.IsZero() && reflect.DeepEqual(sum, st.summary)) {
			continue
		}
		// An idle tenant whose object shows no usage yet has nothing to tell: at 10,000 mostly
		// idle LimitPolicies, writing each an empty usage took as long as their conditions.
		if st.written.IsZero() && idle(sum) && !hasUsage(t.obj) {
			continue
		}
		if s.writeUsage(ctx, t.obj, sum, now) {
			st.written, st.summary = now, sum
		}
	}
	for ref := range s.told {
		if !seen[ref] {
			delete(s.told, ref)
		}
	}
}

// idle: nothing admitted, refused or consumed in the summary's minute.
func idle(sum usage.Summary) bool {
	for _, n := range sum.Refused {
		if n > 0 {
			return false
		}
	}
	return sum.Admitted == 0 && sum.Bytes == 0 && sum.Consumed == 0 && len(sum.TopClients) == 0
}

// hasUsage: the object's status holds a usage (written by this control plane or an earlier one).
func hasUsage(u *unstructured.Unstructured) bool {
	_, found, _ := unstructured.NestedMap(u.Object, "status", "usage")
	return found
}

func (s *Source) writeUsage(ctx context.Context, u *unstructured.Unstructured, sum usage.Summary, now time.Time) bool {
	clients := sum.TopClients
	if clients == nil {
		clients = []usage.ClientCount{} // [], not null: a merge patch's null would remove the field
	}
	summary := map[string]any{"until": now.UTC().Format(time.RFC3339), "admitted": sum.Admitted,
		"refused": sum.Refused, "consumedBytes": sum.Consumed, "topClients": clients}
	body, _ := json.Marshal(map[string]any{"status": map[string]any{"usage": summary}})
	_, err := s.client.Resource(LimitPolicies).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: "weighstation"}, "status")
	if err != nil && ctx.Err() == nil {
		s.cfg.Log.Warn("writing policy usage", "object", fromUnstructured(u).ref(), "err", err)
	}
	return err == nil
}

func (s *Source) tellRefusals(ctx context.Context, u *unstructured.Unstructured, st *told, sum usage.Summary, now time.Time) {
	var total uint64
	reasons := make([]string, 0, len(sum.Refused))
	for r, n := range sum.Refused {
		total += n
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
	}
	refusing := total > 0
	switch {
	case !refusing && st.refusing:
		st.refusing = false
		s.event(ctx, u, st, corev1.EventTypeNormal, "Recovered", "No message refused in the last minute", now)
		return
	case !refusing || st.refusing && now.Sub(st.refusingTold) < refusingEvery:
		return
	}
	st.refusing, st.refusingTold = true, now
	sort.Strings(reasons)
	msg := fmt.Sprintf("Refusing %s in the last minute", strings.Join(reasons, ", "))
	if len(sum.TopClients) > 0 {
		msg += fmt.Sprintf(", top client %s (%d)", sum.TopClients[0].Client, sum.TopClients[0].Refused)
	}
	s.event(ctx, u, st, corev1.EventTypeWarning, "Refusing", msg, now)
}

// event records an Event on the LimitPolicy: a new one, or, within eventEvery of the last new
// one of the same reason, that one counted again.
func (s *Source) event(ctx context.Context, u *unstructured.Unstructured, st *told, kind, reason, msg string, now time.Time) {
	events := s.kube.CoreV1().Events(u.GetNamespace())
	if e := st.events[reason]; e != nil && now.Sub(e.first) < eventEvery {
		e.count++
		body, _ := json.Marshal(map[string]any{"count": e.count, "message": msg, "lastTimestamp": metav1.NewTime(now)})
		if _, err := events.Patch(ctx, e.name, types.MergePatchType, body, metav1.PatchOptions{}); err == nil {
			return
		}
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", u.GetName(), now.UnixNano()), Namespace: u.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(),
			Name: u.GetName(), UID: u.GetUID()},
		Reason: reason, Message: msg, Type: kind, Count: 1,
		FirstTimestamp: metav1.NewTime(now), LastTimestamp: metav1.NewTime(now),
		Source:              corev1.EventSource{Component: "weighstation-control-plane"},
		ReportingController: "weighstation.io/control-plane", ReportingInstance: s.cfg.Identity,
	}
	if _, err := events.Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("recording policy event", "object", fromUnstructured(u).ref(), "reason", reason, "err", err)
		}
		return
	}
	st.events[reason] = &sentEvent{name: ev.Name, first: now, count: 1}
}
