package scenario

import (
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
)

// natsPubSub publishes each operation on one of its connections and completes it when the
// subscriber (its own connection, to the same endpoint unless Config.SubscribeVia says
// otherwise) receives the message: the latency a consumer sees.
type natsPubSub struct {
	*natsPool
	c       engine.Completer
	sub     *nats.Conn
	subject []string // per publishing connection, so per-connection order is visible
	size    int
}

func openNATSPubSub(cfg Config, ep Endpoint, c engine.Completer) (Target, error) {
	pool, err := openPool(cfg, ep, "pub")
	if err != nil {
		return nil, err
	}
	t := &natsPubSub{natsPool: pool, c: c, size: cfg.Size}
	prefix := subjectPrefix(cfg, ep)
	for i := range pool.conns {
		t.subject = append(t.subject, prefix+"."+strconv.Itoa(i))
	}
	subAddr, direct := ep.NATS, ep.AsBaseline
	if cfg.SubscribeVia != "" {
		subAddr, direct = cfg.SubscribeVia, true
	}
	if t.sub, err = natsConn(cfg, subAddr, direct, "sub", &pool.refused); err != nil {
		pool.close()
		return nil, err
	}
	s, err := t.sub.Subscribe(prefix+".>", func(m *nats.Msg) {
		if seq, ok := seqOf(m.Data); ok {
			c.Complete(seq, engine.OK, nil)
		}
	})
	if err == nil {
		// A stall must not make the client drop what it buffered: that would be counted as
		// loss that the system did not cause.
		err = s.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = t.sub.Flush() // the subscription is in place before the first publish
	}
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("subscribing: %w", err)
	}
	return t, nil
}

func (t *natsPubSub) Fire(op engine.Op) {
	if err := t.conns[op.Conn].Publish(t.subject[op.Conn], payload(t.size, op.Seq)); err != nil {
		t.c.Complete(op.Seq, outcome(err), err)
	}
}

// AsyncRefusals counts the -ERR refusals of publishes: a refused message is never delivered, so
// each is among the operations that did not complete. (Request/reply and JetStream refusals
// come back as replies and are attributed to their operation instead.)
func (t *natsPubSub) AsyncRefusals() int64 { return t.refused.count.Load() }

func (t *natsPubSub) Close() error {
	t.close()
	if t.sub != nil {
		t.sub.Close()
	}
	return nil
}
