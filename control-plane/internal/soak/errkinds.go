package soak

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The kinds of error a client can see for a message. Each injected fault excuses only the kinds
// it produces (faultKinds; docs/reliability.md).
const (
	ErrDisconnected    = "disconnected"     // the connection closed or was reconnecting under the message
	ErrTimeout         = "timeout"          // no answer within the client's timeout
	ErrNoResponders    = "no responders"    // NATS: nobody subscribed (nats-server restarting) or no stream answered
	ErrBroker          = "broker error"     // Kafka: a retriable broker error the client gave up on
	ErrDeliveryTimeout = "delivery timeout" // Kafka: retried until its delivery timeout
	ErrLost            = "lost"             // a core NATS publish that never arrived (it has no answer)
	ErrOther           = "other"
)

// natsErrKind classifies an error nats.go reported for a publish, request or JetStream publish.
func natsErrKind(err error) string {
	switch {
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrNoStreamResponse):
		return ErrNoResponders
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrReconnectBufExceeded),
		errors.Is(err, nats.ErrConnectionDraining):
		return ErrDisconnected
	}
	return ErrOther
}

// kafkaErrKind classifies an error franz-go reported for a record.
func kafkaErrKind(err error) string {
	var ke *kerr.Error
	var ne net.Error
	switch {
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, context.DeadlineExceeded):
		return ErrDeliveryTimeout
	case errors.As(err, &ke):
		return ErrBroker
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.As(err, &ne):
		return ErrDisconnected
	}
	return ErrOther
}

// faultKinds are the error kinds each injected fault produces, by protocol. The control plane
// is not on the data path: its outage produces none. A Kafka record survives a broker restart
// by retrying within its delivery timeout, so no Kafka fault excuses a delivery timeout.
var faultKinds = map[string]map[string][]string{
	faultEnvoy: {"nats": {ErrDisconnected, ErrTimeout, ErrNoResponders, ErrLost}, "kafka": {ErrDisconnected, ErrBroker}},
	faultNATS:  {"nats": {ErrDisconnected, ErrTimeout, ErrNoResponders, ErrLost}},
	faultKafka: {"kafka": {ErrDisconnected, ErrBroker}},
}
