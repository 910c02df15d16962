package scenario

import (
	"errors"
	"strings"

	"github.com/IBM/sarama"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
)

// outcome classifies an error the way the contract (§4) says the gateway refuses: NATS's
// non-fatal permissions violation, a no-responders/status reply to a request or JetStream
// publish, Kafka's THROTTLING_QUOTA_EXCEEDED and MESSAGE_TOO_LARGE. Anything else is a failure.
func outcome(err error) engine.Outcome {
	var status statusError
	switch {
	case err == nil:
		return engine.OK
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, sarama.ErrThrottlingQuotaExceeded), errors.Is(err, sarama.ErrMessageSizeTooLarge),
		errors.Is(err, nats.ErrMaxPayload), errors.As(err, &status), isRefusalText(err.Error()):
		return engine.Refused
	default:
		return engine.Failed
	}
}

func isRefusalText(msg string) bool {
	return strings.Contains(msg, "Permissions Violation") || strings.Contains(msg, "limit of tenant")
}

// statusError is a reply that carries a NATS status header instead of a payload (how the
// gateway answers a refused request).
type statusError struct{ status, description string }

func (e statusError) Error() string {
	return strings.TrimSpace("reply with status " + e.status + " " + e.description)
}
