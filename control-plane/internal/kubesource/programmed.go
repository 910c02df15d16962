package kubesource

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// The reasons of the Programmed condition.
const (
	ReasonProgrammed = "Programmed" // every connected gateway acknowledged it
	ReasonRejected   = "Rejected"   // a gateway refused (NACKed) a configuration holding it
	// ReasonPending (shared with Accepted): not yet acknowledged by every connected gateway,
	// or no gateway is connected.
	ReasonNotInForce = "NotInForce" // not accepted, and no earlier generation is in force
)

// contentOf is the content hash a published version carries ("12-3f9a…" holds 3f9a…): the
// same objects make the same hash on every control plane replica, whatever its counter.
func contentOf(version string) string {
	_, h, _ := strings.Cut(version, "-")
	return h
}

// programmed is the Programmed condition of an object generation that is part of the policy
// sets whose content hashes are held (none: never published), from what the connected
// gateways acknowledged.
func programmed(v verdict, held []string, nodes []xds.NodeStatus, generation int64) metav1.Condition {
	c := metav1.Condition{Type: "Programmed", ObservedGeneration: generation}
	switch {
	case v.InForce == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonNotInForce, "the gateways are given nothing of this object"
		return c
	case len(held) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonPending, "not yet published: the policy set is not valid (see the GatewayDefaults' status)"
		return c
	}
	holds := func(version string) bool { return version != "" && slices.Contains(held, contentOf(version)) }
	connected, acked := 0, 0
	var rejected []string
	for _, n := range nodes {
		if !n.Connected {
			continue
		}
		connected++
		switch {
		// A NACK stands over an ACK of the same version (see xds.NodeStatus).
		case holds(n.AckedVersion) && n.AckedVersion != n.NackedVersion:
			acked++
		case holds(n.NackedVersion):
			rejected = append(rejected, fmt.Sprintf("gateway %s rejected version %s: %s", n.ID, n.NackedVersion, n.NackReason))
		}
	}
	count := fmt.Sprintf("%d/%d gateways", acked, connected)
	switch {
	case len(rejected) > 0:
		if len(rejected) > 3 {
			rejected = append(rejected[:3], fmt.Sprintf("and %d more", len(rejected)-3))
		}
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonRejected, count+"; "+strings.Join(rejected, "; ")
	case connected == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonPending, "no gateway is connected"
	case acked < connected:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonPending, count
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonProgrammed, count
	}
	if v.InForce != v.Generation {
		c.Message += fmt.Sprintf(" (generation %d)", v.InForce)
	}
	return c
}

// acceptedCondition is the Accepted condition of a verdict. An accepted object's warnings
// (findings that leave it valid) follow "in force", as an invalid one's errors are its message.
func acceptedCondition(v verdict) metav1.Condition {
	c := metav1.Condition{Type: "Accepted", ObservedGeneration: v.Generation, Reason: v.Reason, Message: v.Message, Status: metav1.ConditionFalse}
	if v.Reason == ReasonAccepted {
		c.Status, c.Message = metav1.ConditionTrue, "in force"
		if v.Message != "" {
			c.Message += "; warning: " + v.Message
		}
	}
	return c
}
