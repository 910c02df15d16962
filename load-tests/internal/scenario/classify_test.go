package scenario

import (
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
)

// The gateway's refusals (contract §4), however each client library surfaces them, count as
// refused; everything else as failed.
func TestOutcomeClassifiesRefusals(t *testing.T) {
	for err, want := range map[error]engine.Outcome{
		nil:                           engine.OK,
		nats.ErrNoResponders:          engine.Refused,
		jetstream.ErrNoStreamResponse: engine.Refused,
		fmt.Errorf("nats: permissions violation: %w", errors.New(`Permissions Violation for Publish to "orders.new" (rate limit of tenant acme: 5000/s)`)): engine.Refused,
		statusError{"429", "Too Many Requests"}:                      engine.Refused,
		fmt.Errorf("produce: %w", sarama.ErrThrottlingQuotaExceeded): engine.Refused,
		sarama.ErrMessageSizeTooLarge:                                engine.Refused,
		nats.ErrTimeout:                                              engine.Failed,
		nats.ErrConnectionClosed:                                     engine.Failed,
		sarama.ErrNotLeaderForPartition:                              engine.Failed,
	} {
		if got := outcome(err); got != want {
			t.Errorf("outcome(%v) = %d, want %d", err, got, want)
		}
	}
}
