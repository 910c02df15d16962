// Package scenario connects the engine's operations to real clients: nats.go for NATS
// publish/subscribe, request/reply and JetStream, IBM/sarama for Kafka produce. Each scenario
// opens one Target per endpoint (direct broker or gateway) with its own connections.
package scenario

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
	"github.com/weighstation/weighstation/load-tests/internal/refusals"
)

// Config is what every scenario shares.
type Config struct {
	Connections int
	Size        int           // payload bytes (at least 8: the operation's sequence number)
	Timeout     time.Duration // for one request, JetStream publish or Kafka produce
	RunID       string        // keeps this run's subjects apart from any other's

	NATSUser, NATSPassword string
	// NATSName names the publishing connections (CONNECT name: the client within its tenant,
	// for client limits); default weighstation-bench-<role>.
	NATSName string
	// DirectNATSUser and DirectNATSPassword are who connects to nats-server itself (an
	// AsBaseline endpoint, SubscribeVia), DirectKafkaUser and DirectKafkaPassword to Kafka itself (SASL
	// PLAIN): identities that belong to no tenant, since the brokers behind the gateway admit
	// tenants' identities only through it.
	DirectNATSUser, DirectNATSPassword   string
	DirectKafkaUser, DirectKafkaPassword string
	// SubscribeVia, if set, is the NATS address of nats-server itself, which the pub/sub
	// subscriber uses instead of the endpoint's: it measures what the gateway let through.
	SubscribeVia string

	KafkaClientID string // selects the tenant at the gateway by prefix
	KafkaTopic    string
	KafkaRetries  int // sarama's Producer.Retry.Max; 0 so a refusal is seen, not retried away
}

// Endpoint is one place to send to.
type Endpoint struct {
	Name  string // "direct", "gateway", …
	NATS  string // host:port
	Kafka string // host:port
	// PinKafka sends every Kafka connection to Kafka, whatever address the broker advertises.
	// The local broker advertises the gateway, so a direct client must ignore that (this is
	// sound for a single-broker cluster only).
	PinKafka bool
	// AsBaseline: the endpoint is reached as Config's direct identities, not the tenant's: the
	// brokers themselves, and Envoy's tcp_proxy listener, which (without the filter) is no
	// trusted proxy of nats-server.
	AsBaseline bool
}

// Target is an engine target with connections to close.
type Target interface {
	engine.Target
	io.Closer
}

// AsyncRefusals is implemented by targets whose refusals arrive without naming the operation
// (a NATS -ERR answers a plain publish, which has no reply): the engine cannot attribute them,
// so they are reported as a count.
type AsyncRefusals interface {
	AsyncRefusals() int64
}

// RefusalReasons is implemented by every target: the limits its refusals named, most frequent
// first (refusals.Tally).
type RefusalReasons interface {
	RefusalReasons() []refusals.Reason
}

type opener func(cfg Config, ep Endpoint, c engine.Completer) (Target, error)

type scenario struct {
	what string
	open opener
	// minSize is the smallest payload the scenario can carry.
	minSize int
}

var scenarios = map[string]scenario{
	"nats-pubsub":   {"NATS publish, measured to delivery at a subscriber", openNATSPubSub, seqBytes},
	"nats-request":  {"NATS request/reply with an echoing responder", openNATSRequest, seqBytes},
	"jetstream":     {"JetStream publish, measured to the stream's ack", openJetStream, seqBytes},
	"kafka-acks1":   {"Kafka produce with acks=1 (leader), measured to the ack", openKafka(acksLeader), seqBytes},
	"kafka-acksall": {"Kafka produce with acks=all, measured to the ack", openKafka(acksAll), seqBytes},
}

// Names lists the scenarios with a line on what each measures.
func Names() []string {
	var out []string
	for n, s := range scenarios {
		out = append(out, fmt.Sprintf("%-14s %s", n, s.what))
	}
	sort.Strings(out)
	return out
}

// Describe says what scenario name measures.
func Describe(name string) string { return scenarios[name].what }

// IsKafka says whether a scenario talks to Kafka (else NATS).
func IsKafka(name string) bool { return name == "kafka-acks1" || name == "kafka-acksall" }

// Open connects scenario name to ep; outcomes go to c.
func Open(name string, cfg Config, ep Endpoint, c engine.Completer) (Target, error) {
	s, ok := scenarios[name]
	if !ok {
		return nil, fmt.Errorf("unknown scenario %q", name)
	}
	if cfg.Size < s.minSize {
		return nil, fmt.Errorf("message size %d is below the %d bytes %s needs", cfg.Size, s.minSize, name)
	}
	if cfg.Connections < 1 {
		return nil, fmt.Errorf("need at least one connection")
	}
	t, err := s.open(cfg, ep, c)
	if err != nil {
		return nil, fmt.Errorf("%s via %s: %w", name, ep.Name, err)
	}
	return t, nil
}

// seqBytes: every payload starts with the operation's sequence number, so a subscriber or a
// reply can say which operation completed.
const seqBytes = 8

func payload(size, seq int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(seq))
	return b
}

func seqOf(b []byte) (int, bool) {
	if len(b) < seqBytes {
		return 0, false
	}
	return int(binary.BigEndian.Uint64(b)), true
}
