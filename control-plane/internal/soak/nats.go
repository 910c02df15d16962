package soak

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// NATS message kinds: a core publish to a subscriber, a request to a responder, a JetStream
// publish to the soak stream.
const (
	KindPub     = "nats-pub"
	KindRequest = "nats-request"
	KindJS      = "nats-jetstream"
)

// Each message has a subject of its own, soak.<tenant>.<kind>.<seq>, so a refusal's Permissions
// Violation, which names the subject, names the message.
var subjectKinds = map[string]string{"pub": KindPub, "req": KindRequest, "js": KindJS}

const (
	streamName     = "SOAK"
	streamSubjects = "soak.*.js.>"
	// requestTimeout is longer than any hold (queue maxWait 2 s) so a held request is answered.
	requestTimeout = 5 * time.Second
	// unacknowledged is how long a core publish may be held or on its way.
	unacknowledged = 3 * time.Second
)

func subject(tenant, short string, seq int) string {
	return "soak." + tenant + "." + short + "." + strconv.Itoa(seq)
}

// parseSubject is subject's inverse.
func parseSubject(s string) (tenant, kind string, seq int, ok bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 || parts[0] != "soak" {
		return "", "", 0, false
	}
	kind, ok = subjectKinds[parts[2]]
	seq, err := strconv.Atoi(parts[3])
	return parts[1], kind, seq, ok && err == nil
}

var violation = regexp.MustCompile(`Permissions Violation for Publish to "([^"]+)"`)

// reconnecting: every soak connection reconnects for as long as it takes, at once, as services
// do. A disconnect excuses nothing by itself (only the injected faults do; ledger.go).
func reconnecting() []nats.Option {
	return []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
}

// natsSide is the far side of the NATS flows, connected to nats-server directly (as the
// baseline user: tenants reach nats-server only through the gateway): a subscriber
// to the core publishes, a responder to the requests, and the JetStream stream.
type natsSide struct {
	sub, resp *nats.Conn
	present   *presence
}

func startNATSSide(serverURL string, present *presence) (*natsSide, error) {
	side := &natsSide{present: present}
	connect := func(name string) (*nats.Conn, error) {
		return nats.Connect(serverURL, append(reconnecting(), nats.UserInfo(localstack.BaselineNATSUser, localstack.BaselineNATSUser+"-secret"), nats.Name(name))...)
	}
	var err error
	if side.sub, err = connect("soak subscriber"); err != nil {
		return nil, err
	}
	if side.resp, err = connect("soak responder"); err != nil {
		side.close()
		return nil, err
	}
	count := func(m *nats.Msg) {
		if tenant, kind, seq, ok := parseSubject(m.Subject); ok {
			present.add(tenant, kind, seq)
		}
	}
	if _, err := side.sub.Subscribe("soak.*.pub.>", count); err != nil {
		side.close()
		return nil, err
	}
	if _, err := side.resp.Subscribe("soak.*.req.>", func(m *nats.Msg) {
		count(m)
		_ = m.Respond([]byte("ok"))
	}); err != nil {
		side.close()
		return nil, err
	}
	js, err := side.sub.JetStream()
	if err == nil {
		_ = js.DeleteStream(streamName)
		_, err = js.AddStream(&nats.StreamConfig{Name: streamName, Subjects: []string{streamSubjects}, Storage: nats.FileStorage})
	}
	if err != nil {
		side.close()
		return nil, fmt.Errorf("creating the soak stream: %w", err)
	}
	return side, side.sub.Flush()
}

func (s *natsSide) close() {
	for _, c := range []*nats.Conn{s.sub, s.resp} {
		if c != nil {
			c.Close()
		}
	}
}

// readStream counts the stream's messages into present; it returns how many it read.
func (s *natsSide) readStream(ctx context.Context) (int, error) {
	js, err := s.sub.JetStream()
	if err != nil {
		return 0, err
	}
	info, err := js.StreamInfo(streamName)
	if err != nil {
		return 0, err
	}
	want := int(info.State.Msgs)
	sub, err := js.SubscribeSync(streamSubjects, nats.OrderedConsumer(), nats.DeliverAll())
	if err != nil {
		return 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	n := 0
	for n < want {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, fmt.Errorf("read %d of the stream's %d messages: %w", n, want, err)
		}
		if tenant, kind, seq, ok := parseSubject(m.Subject); ok {
			s.present.add(tenant, kind, seq)
		}
		n++
	}
	return n, nil
}

// natsClient is one tenant's NATS load through the gateway: core publishes, requests and
// JetStream publishes on one connection, as a service would send them.
type natsClient struct {
	tenant          string
	conn            *nats.Conn
	js              nats.JetStreamContext
	pub, req, jsPub *recorder
	refusals        int64 // Permissions Violations seen, for the comparison with the metric
	refusalsMu      sync.Mutex
}

// NATSRates are each tenant's messages per second of each kind.
var NATSRates = map[string]float64{KindPub: 40, KindRequest: 10, KindJS: 10}

func startNATSClient(gatewayURL, tenant string) (*natsClient, error) {
	c := &natsClient{tenant: tenant,
		pub: newRecorder(tenant, KindPub, natsErrKind), req: newRecorder(tenant, KindRequest, natsErrKind), jsPub: newRecorder(tenant, KindJS, natsErrKind)}
	opts := append(reconnecting(), nats.UserInfo(tenant, tenant+"-secret"), nats.Name("soak "+tenant),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.onError(err) }))
	var err error
	if c.conn, err = nats.Connect(gatewayURL, opts...); err != nil {
		return nil, err
	}
	if c.js, err = c.conn.JetStream(nats.MaxWait(requestTimeout)); err != nil {
		c.conn.Close()
		return nil, err
	}
	return c, nil
}

// onError takes the gateway's Permissions Violations: each names the refused message's subject.
func (c *natsClient) onError(err error) {
	m := violation.FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	c.refusalsMu.Lock()
	c.refusals++
	c.refusalsMu.Unlock()
	tenant, kind, seq, ok := parseSubject(m[1])
	if !ok || tenant != c.tenant {
		return
	}
	c.recorder(kind).refused(seq)
}

func (c *natsClient) recorder(kind string) *recorder {
	switch kind {
	case KindPub:
		return c.pub
	case KindRequest:
		return c.req
	default:
		return c.jsPub
	}
}

// run sends until ctx is done; wg tracks the outstanding requests and JetStream publishes.
func (c *natsClient) run(ctx context.Context, wg *sync.WaitGroup) {
	payload := make([]byte, 128)
	var senders sync.WaitGroup
	senders.Add(3)
	go func() {
		defer senders.Done()
		paced(ctx, NATSRates[KindPub], func(at time.Time) {
			seq := c.pub.next(at)
			if err := c.conn.Publish(subject(c.tenant, "pub", seq), payload); err != nil {
				c.pub.answered(seq, err)
			}
		})
	}()
	go func() {
		defer senders.Done()
		paced(ctx, NATSRates[KindRequest], func(at time.Time) {
			seq := c.req.next(at)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.conn.Request(subject(c.tenant, "req", seq), payload, requestTimeout)
				c.req.answered(seq, err)
			}()
		})
	}()
	go func() {
		defer senders.Done()
		paced(ctx, NATSRates[KindJS], func(at time.Time) {
			seq := c.jsPub.next(at)
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Not retried: a refused publish that a retry delivered would be both refused and
				// delivered, and the ledger could not tell which the client was left believing.
				_, err := c.js.Publish(subject(c.tenant, "js", seq), payload,
					nats.MsgId(c.tenant+"-"+strconv.Itoa(seq)), nats.RetryAttempts(0))
				c.jsPub.answered(seq, err)
			}()
		})
	}()
	senders.Wait()
}

func (c *natsClient) seenRefusals() int64 {
	c.refusalsMu.Lock()
	defer c.refusalsMu.Unlock()
	return c.refusals
}
