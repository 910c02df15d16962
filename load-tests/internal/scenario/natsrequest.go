package scenario

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weighstation/weighstation/load-tests/internal/engine"
)

// natsRequest sends each operation as a request and completes it on the reply, from a
// responder on its own connection to the same endpoint that echoes the sequence number.
type natsRequest struct {
	*natsPool
	c         engine.Completer
	responder *nats.Conn
	subject   string
	size      int
	timeout   time.Duration
}

func openNATSRequest(cfg Config, ep Endpoint, c engine.Completer) (Target, error) {
	pool, err := openPool(cfg, ep, "requester")
	if err != nil {
		return nil, err
	}
	t := &natsRequest{natsPool: pool, c: c, subject: subjectPrefix(cfg, ep) + ".request", size: cfg.Size, timeout: cfg.Timeout}
	if t.responder, err = natsConn(cfg, ep.NATS, ep.AsBaseline, "responder", &pool.refused); err != nil {
		pool.close()
		return nil, err
	}
	s, err := t.responder.Subscribe(t.subject, func(m *nats.Msg) { _ = m.Respond(m.Data[:min(len(m.Data), seqBytes)]) })
	if err == nil {
		err = s.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = t.responder.Flush()
	}
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("starting the responder: %w", err)
	}
	return t, nil
}

func (t *natsRequest) Fire(op engine.Op) {
	m, err := t.conns[op.Conn].Request(t.subject, payload(t.size, op.Seq), t.timeout)
	if err == nil {
		if status := m.Header.Get("Status"); status != "" {
			err = statusError{status, m.Header.Get("Description")}
		} else if seq, ok := seqOf(m.Data); !ok || seq != op.Seq {
			err = fmt.Errorf("reply %q does not answer operation %d", m.Data, op.Seq)
		}
	}
	t.c.Complete(op.Seq, outcome(err), err)
}

func (t *natsRequest) Close() error {
	t.close()
	if t.responder != nil {
		t.responder.Close()
	}
	return nil
}
