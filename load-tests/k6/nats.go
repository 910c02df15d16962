package weighstation

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grafana/sobek"
	"github.com/nats-io/nats.go"
)

type natsOptions struct {
	URL         string `js:"url"`
	User        string `js:"user"`
	Password    string `js:"password"`
	Connections int    `js:"connections"` // shared by all VUs; default 1
	Timeout     string `js:"timeout"`     // for publish confirmation and requests; default 5s
}

// natsPool is the connections shared by every VU using the same options.
type natsPool struct {
	conns   []*nats.Conn
	next    atomic.Uint64
	timeout time.Duration
	// responders started by serve(), one per subject
	mu       sync.Mutex
	serving  map[string]bool
	refusals atomic.Int64 // -ERR refusals of plain publishes, reported asynchronously
}

// NATS is the script's handle.
type NATS struct {
	m    *instance
	pool *natsPool
}

func (m *instance) natsClient(v sobek.Value) (*NATS, error) {
	var o natsOptions
	if err := m.options(v, &o); err != nil {
		return nil, err
	}
	if o.URL == "" {
		o.URL = "nats://127.0.0.1:4222"
	}
	o.Connections = max(o.Connections, 1)
	if o.Timeout == "" {
		o.Timeout = "5s"
	}
	timeout, err := time.ParseDuration(o.Timeout)
	if err != nil {
		return nil, fmt.Errorf("timeout: %w", err)
	}
	m.root.mu.Lock()
	defer m.root.mu.Unlock()
	if p, ok := m.root.nats[o]; ok {
		return &NATS{m, p}, nil
	}
	p := &natsPool{timeout: timeout, serving: map[string]bool{}}
	for i := range o.Connections {
		opts := []nats.Option{
			nats.Name(fmt.Sprintf("k6-weighstation-%d", i)),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				if isRefusal(err) {
					p.refusals.Add(1)
				}
			}),
		}
		if o.User != "" {
			opts = append(opts, nats.UserInfo(o.User, o.Password))
		}
		nc, err := nats.Connect(o.URL, opts...)
		if err != nil {
			for _, c := range p.conns {
				c.Close()
			}
			return nil, fmt.Errorf("connecting to %s: %w", o.URL, err)
		}
		p.conns = append(p.conns, nc)
	}
	m.root.nats[o] = p
	return &NATS{m, p}, nil
}

func (p *natsPool) conn() *nats.Conn { return p.conns[p.next.Add(1)%uint64(len(p.conns))] }

// Publish publishes and waits until the server (through the gateway) has processed it — a
// PING/PONG round trip behind the message — so the duration includes any backpressure.
func (n *NATS) Publish(subject, payload string) Result {
	start := time.Now()
	nc := n.pool.conn()
	err := nc.Publish(subject, []byte(payload))
	if err == nil {
		err = nc.FlushTimeout(n.pool.timeout)
	}
	return n.m.record("nats_publish", start, isRefusal(err), err)
}

// Request sends a request and waits for its reply.
func (n *NATS) Request(subject, payload string) Result {
	start := time.Now()
	msg, err := n.pool.conn().Request(subject, []byte(payload), n.pool.timeout)
	if err == nil && msg.Header.Get("Status") != "" {
		err = fmt.Errorf("reply with status %s %s", msg.Header.Get("Status"), msg.Header.Get("Description"))
		return n.m.record("nats_request", start, true, err)
	}
	return n.m.record("nats_request", start, isRefusal(err), err)
}

// Serve starts (once per subject, for all VUs) a responder that echoes requests, so a
// request/reply scenario needs nothing else running.
func (n *NATS) Serve(subject string) error {
	p := n.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.serving[subject] {
		return nil
	}
	nc := p.conns[0]
	s, err := nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err == nil {
		err = s.SetPendingLimits(-1, -1)
	}
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		return err
	}
	p.serving[subject] = true
	return nil
}

// AsyncRefusals is how many plain publishes the gateway refused so far (NATS reports those
// with an -ERR that names no message).
func (n *NATS) AsyncRefusals() int64 { return n.pool.refusals.Load() }

func isRefusal(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, nats.ErrNoResponders) || strings.Contains(err.Error(), "Permissions Violation") ||
		strings.Contains(err.Error(), "limit of tenant")
}
