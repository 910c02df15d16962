// Package soak runs the local stack under fixed-rate mixed load for a while, injects faults on a
// schedule (policy flips, the control plane, nats-server, Kafka and Envoy killed or drained,
// hostile clients), then accounts for every message sent: each is delivered, refused with an
// error its client saw, or failed with an error of a kind an injected fault produces, seen
// while that fault lasted (plus a stated grace). Anything else is unaccounted — a disconnect
// no fault explains included — and a soak with unaccounted messages fails.
package soak

import (
	"slices"
	"time"
)

// Message is what one client learned about one message it sent.
type Message struct {
	Sent time.Time // the intended send time (open loop)
	Done time.Time // when the client learned the outcome; zero for a core NATS publish
	// Acked: the client got a positive answer (a reply, a JetStream or Kafka acknowledgement).
	Acked bool
	// Refused: the client saw the gateway refuse this message (a Permissions Violation naming
	// its subject, THROTTLING_QUOTA_EXCEEDED or MESSAGE_TOO_LARGE).
	Refused bool
	// Failed: the client saw another error for it (a timeout, a closed connection), of kind
	// Err (see errkinds.go).
	Failed bool
	Err    string
}

// Window is a span in which an injected fault had a component on a flow's path down or
// restarting (End includes the recovery grace), and the error kinds it produces on that flow:
// a failure is excused only by a window of its kind.
type Window struct {
	Start, End time.Time
	What       string
	Kinds      []string
}

func (w Window) produces(kind string) bool { return slices.Contains(w.Kinds, kind) }

func (w Window) overlaps(from, to time.Time) bool {
	return !to.Before(w.Start) && !from.After(w.End)
}

// Flow is one tenant's messages of one kind, with where they were found at the end.
type Flow struct {
	Tenant string
	Kind   string
	// Messages are indexed by sequence number.
	Messages []Message
	// Present counts the copies of each message found at its destination (the subscriber, the
	// responder, the JetStream stream, the Kafka topic).
	Present []int
	// Faults are the injected faults on this flow's path.
	Faults []Window
	// Unacknowledged is how long a message without an answer (a core NATS publish) may be on
	// its way: it was lost to a fault if a fault window overlaps [Sent, Sent+Unacknowledged].
	Unacknowledged time.Duration
}

// Row is a flow's account: every message sent is in exactly one of Delivered, Refused,
// FailedInFault and Unaccounted.
type Row struct {
	Tenant, Kind  string
	Sent          int
	Delivered     int // found at its destination (acknowledged, where the protocol acknowledges)
	Refused       int // refused, the client told, and not delivered
	FailedInFault int // an error of a kind a fault on its path produces, seen while it lasted
	Unaccounted   int
	// Of the unaccounted, for the reader: acknowledged but not found (a loss), refused but
	// delivered anyway, failed with no fault to explain it.
	AckedMissing, RefusedDelivered, FailedNoFault int
	// Duplicates are copies beyond the first (at-least-once retries); DeliveredDespiteError are
	// messages the client was told failed that arrived all the same.
	Duplicates, DeliveredDespiteError int
	// RefusedOutsideFaults are refusals whose message was sent outside every fault window.
	RefusedOutsideFaults int
	// SlowestAck is the longest a message waited for its acknowledgement: how close a flow came
	// to its client's timeout (a Kafka record's delivery timeout).
	SlowestAck time.Duration
	// UnaccountedSent spans the send times of the unaccounted messages (zero if none): when to
	// look in the logs.
	UnaccountedSent Window
}

// Account classifies every message of the flow.
func Account(f Flow) Row {
	r := Row{Tenant: f.Tenant, Kind: f.Kind, Sent: len(f.Messages)}
	for i, m := range f.Messages {
		present := 0
		if i < len(f.Present) {
			present = f.Present[i]
		}
		if m.Acked && m.Done.Sub(m.Sent) > r.SlowestAck {
			r.SlowestAck = m.Done.Sub(m.Sent)
		}
		if present > 1 {
			r.Duplicates += present - 1
		}
		inFault := f.excused(m)
		switch {
		case m.Refused && present > 0:
			r.Unaccounted++
			r.RefusedDelivered++
		case m.Refused:
			r.Refused++
			if !inFault {
				r.RefusedOutsideFaults++
			}
		case present > 0:
			r.Delivered++
			if m.Failed {
				r.DeliveredDespiteError++
			}
		case inFault:
			r.FailedInFault++
		default:
			r.Unaccounted++
			if r.UnaccountedSent.Start.IsZero() || m.Sent.Before(r.UnaccountedSent.Start) {
				r.UnaccountedSent.Start = m.Sent
			}
			if m.Sent.After(r.UnaccountedSent.End) {
				r.UnaccountedSent.End = m.Sent
			}
			if m.Acked {
				r.AckedMissing++
			} else {
				r.FailedNoFault++
			}
		}
	}
	return r
}

// excused says whether a fault on the flow's path explains a message that was neither refused
// nor delivered: its error is of a kind the fault produces, seen while the fault lasted — a
// timeout, whose cause is anywhere in [sent, seen], while it overlapped the fault — or, for a
// core publish that has no answer, it was on its way (Unacknowledged) while the fault lasted.
func (f Flow) excused(m Message) bool {
	for _, w := range f.Faults {
		switch {
		case !m.Failed && m.Done.IsZero():
			if w.produces(ErrLost) && w.overlaps(m.Sent, m.Sent.Add(f.Unacknowledged)) {
				return true
			}
		case !m.Failed:
		case m.Err == ErrTimeout:
			if w.produces(m.Err) && w.overlaps(m.Sent, m.Done) {
				return true
			}
		case w.produces(m.Err) && w.overlaps(m.Done, m.Done):
			return true
		}
	}
	return false
}

// Total sums rows.
func Total(rows []Row) Row {
	t := Row{Tenant: "all", Kind: "all"}
	for _, r := range rows {
		t.Sent += r.Sent
		t.Delivered += r.Delivered
		t.Refused += r.Refused
		t.FailedInFault += r.FailedInFault
		t.Unaccounted += r.Unaccounted
		t.AckedMissing += r.AckedMissing
		t.RefusedDelivered += r.RefusedDelivered
		t.FailedNoFault += r.FailedNoFault
		t.Duplicates += r.Duplicates
		t.DeliveredDespiteError += r.DeliveredDespiteError
		t.RefusedOutsideFaults += r.RefusedOutsideFaults
		t.SlowestAck = max(t.SlowestAck, r.SlowestAck)
	}
	return t
}
