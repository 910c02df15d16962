package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
)

// benchStream holds the JetStream scenario's messages: in memory, so the figures are the
// protocol's and the gateway's rather than the disk's, and bounded, oldest dropped first.
var benchStream = jetstream.StreamConfig{
	Name:     "WEIGHSTATION_BENCH",
	Subjects: []string{"weighstation.bench.*.*.js.>"},
	Storage:  jetstream.MemoryStorage,
	MaxBytes: 64 << 20,
	Discard:  jetstream.DiscardOld,
	Replicas: 1,
}

// jetStreamPublish publishes each operation to a stream and completes it on the PubAck.
type jetStreamPublish struct {
	*natsPool
	c       engine.Completer
	js      []jetstream.JetStream
	subject string
	size    int
	timeout time.Duration
}

func openJetStream(cfg Config, ep Endpoint, c engine.Completer) (Target, error) {
	pool, err := openPool(cfg, ep, "jetstream")
	if err != nil {
		return nil, err
	}
	t := &jetStreamPublish{natsPool: pool, c: c, subject: subjectPrefix(cfg, ep) + ".js.publish", size: cfg.Size, timeout: cfg.Timeout}
	for _, nc := range pool.conns {
		js, err := jetstream.New(nc)
		if err != nil {
			pool.close()
			return nil, err
		}
		t.js = append(t.js, js)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := t.js[0].CreateOrUpdateStream(ctx, benchStream); err != nil {
		pool.close()
		return nil, fmt.Errorf("creating stream %s: %w", benchStream.Name, err)
	}
	return t, nil
}

func (t *jetStreamPublish) Fire(op engine.Op) {
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	// No retry: nats.go would retry a no-responders reply, which is how a refusal is told.
	_, err := t.js[op.Conn].Publish(ctx, t.subject, payload(t.size, op.Seq), jetstream.WithRetryAttempts(0))
	t.c.Complete(op.Seq, outcome(err), err)
}

func (t *jetStreamPublish) Close() error {
	t.close()
	return nil
}
