package kubesource

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

func TestProgrammed(t *testing.T) {
	in := verdict{Generation: 2, Reason: ReasonAccepted, InForce: 2}
	// The generation is in the sets hashed h3 and h4; h2 is an older set without it.
	held := []string{"h3", "h4"}
	node := func(id, acked, nacked string) xds.NodeStatus {
		return xds.NodeStatus{ID: id, Connected: true, AckedVersion: acked, NackedVersion: nacked, NackReason: "refused"}
	}
	for _, c := range []struct {
		name    string
		v       verdict
		held    []string
		nodes   []xds.NodeStatus
		status  metav1.ConditionStatus
		reason  string
		message string
	}{
		{"every gateway acknowledged", in, held, []xds.NodeStatus{node("a", "3-h3", ""), node("b", "4-h4", "")}, metav1.ConditionTrue, ReasonProgrammed, "2/2 gateways"},
		{"another replica's counter, the same content", in, held, []xds.NodeStatus{node("a", "1-h4", "")}, metav1.ConditionTrue, ReasonProgrammed, "1/1 gateways"},
		{"one has not yet", in, held, []xds.NodeStatus{node("a", "3-h3", ""), node("b", "2-h2", "")}, metav1.ConditionFalse, ReasonPending, "1/2 gateways"},
		{"a disconnected one does not count", in, held, []xds.NodeStatus{node("a", "3-h3", ""), {ID: "b", AckedVersion: "1-h1"}}, metav1.ConditionTrue, ReasonProgrammed, "1/1 gateways"},
		{"a NACK stands over an ACK of the same version", in, held, []xds.NodeStatus{node("a", "3-h3", "3-h3")}, metav1.ConditionFalse, ReasonRejected, "0/1 gateways; gateway a rejected version 3-h3: refused"},
		{"a NACK of a set without it does not", in, held, []xds.NodeStatus{node("a", "4-h4", "2-h2")}, metav1.ConditionTrue, ReasonProgrammed, "1/1 gateways"},
		{"nothing acknowledged yet", in, held, []xds.NodeStatus{node("a", "", "")}, metav1.ConditionFalse, ReasonPending, "0/1 gateways"},
		{"no gateway", in, held, nil, metav1.ConditionFalse, ReasonPending, "no gateway is connected"},
		{"never published", in, nil, []xds.NodeStatus{node("a", "3-h3", "")}, metav1.ConditionFalse, ReasonPending, "not yet published"},
		{"not accepted", verdict{Generation: 2, Reason: ReasonInvalid}, held, []xds.NodeStatus{node("a", "3-h3", "")}, metav1.ConditionFalse, ReasonNotInForce, "nothing of this object"},
		{"an earlier generation in force", verdict{Generation: 2, Reason: ReasonInvalid, InForce: 1}, held, []xds.NodeStatus{node("a", "3-h3", "")}, metav1.ConditionTrue, ReasonProgrammed, "1/1 gateways (generation 1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := programmed(c.v, c.held, c.nodes, c.v.Generation)
			if got.Status != c.status || got.Reason != c.reason || !strings.Contains(got.Message, c.message) {
				t.Errorf("got %s %s %q, want %s %s %q", got.Status, got.Reason, got.Message, c.status, c.reason, c.message)
			}
		})
	}
}

func TestAcceptedCondition(t *testing.T) {
	for _, c := range []struct {
		name    string
		v       verdict
		status  metav1.ConditionStatus
		message string
	}{
		{"accepted", verdict{Generation: 3, Reason: ReasonAccepted}, metav1.ConditionTrue, "in force"},
		{"accepted with a warning", verdict{Generation: 3, Reason: ReasonAccepted, Message: "spec.clients.default.rate.burstMessages: 300 is at least the tenant's burst (300)"},
			metav1.ConditionTrue, "in force; warning: spec.clients.default.rate.burstMessages: 300 is at least the tenant's burst (300)"},
		{"invalid", verdict{Generation: 3, Reason: ReasonInvalid, Message: "spec.limits.inFlight: inFlight must be at least 1"},
			metav1.ConditionFalse, "spec.limits.inFlight: inFlight must be at least 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := acceptedCondition(c.v)
			if got.Status != c.status || got.Reason != c.v.Reason || got.Message != c.message || got.ObservedGeneration != 3 {
				t.Errorf("got %s %s %q (generation %d), want %s %s %q", got.Status, got.Reason, got.Message, got.ObservedGeneration, c.status, c.v.Reason, c.message)
			}
		})
	}
}
