package e2e

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"
)

var natsLabels = func(tenant string) map[string]string {
	return map[string]string{"protocol": "nats", "tenant": tenant}
}

// A message published through the gateway reaches a subscriber connected straight to
// nats-server, and is counted for the publishing tenant.
func TestNATSPublishThroughGatewayReachesDirectSubscriber(t *testing.T) {
	sub := directNATS(t)
	s, err := sub.SubscribeSync("spine.hello")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	before := metric(t, "weighstation_messages_accepted", natsLabels("acme"))
	beforeBytes := metric(t, "weighstation_bytes_accepted", natsLabels("acme"))

	pub := gatewayNATS(t, "acme", "acme-secret")
	payload := []byte("weighed at the edge")
	if err := pub.Publish("spine.hello", payload); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	msg, err := s.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("the direct subscriber got nothing: %v", err)
	}
	if !bytes.Equal(msg.Data, payload) {
		t.Fatalf("got %q, want %q", msg.Data, payload)
	}
	eventually(t, 5*time.Second, "acme's accepted counters move", func() bool {
		return metric(t, "weighstation_messages_accepted", natsLabels("acme")) == before+1 &&
			metric(t, "weighstation_bytes_accepted", natsLabels("acme")) == beforeBytes+float64(len(payload))
	})
}

// Each connection is counted for the tenant its CONNECT user belongs to, and a client with no
// credentials for the default tenant.
func TestNATSConnectionsAreAttributedToTheirTenant(t *testing.T) {
	cases := []struct{ user, pass, tenant string }{
		{"globex", "globex-secret", "globex"},
		{"", "", "anonymous"},
	}
	for _, c := range cases {
		t.Run(c.tenant, func(t *testing.T) {
			before := map[string]float64{}
			for _, tenant := range []string{"acme", "globex", "anonymous"} {
				before[tenant] = metric(t, "weighstation_messages_accepted", natsLabels(tenant))
			}
			nc := gatewayNATS(t, c.user, c.pass)
			for i := 0; i < 3; i++ {
				if err := nc.Publish("spine.attribution", []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, c.tenant+" counted 3 messages", func() bool {
				return metric(t, "weighstation_messages_accepted", natsLabels(c.tenant)) == before[c.tenant]+3
			})
			for tenant, v := range before {
				if tenant != c.tenant && metric(t, "weighstation_messages_accepted", natsLabels(tenant)) != v {
					t.Errorf("tenant %s was counted for %s's messages", tenant, c.tenant)
				}
			}
			if got := metric(t, "weighstation_connections_active", natsLabels(c.tenant)); got < 1 {
				t.Errorf("connections_active for %s = %v, want ≥ 1", c.tenant, got)
			}
		})
	}
}

// rawNATS is a hand-driven client for what nats.go would refuse to send.
type rawNATS struct {
	t    *testing.T
	conn net.Conn
}

func dialRawNATS(t *testing.T, connectJSON string) *rawNATS {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr(ports.NATS), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := &rawNATS{t: t, conn: c}
	r.expect("INFO ")
	r.send("CONNECT " + connectJSON + "\r\nPING\r\n")
	r.expect("PONG")
	return r
}

func (r *rawNATS) send(s string) {
	r.t.Helper()
	if _, err := r.conn.Write([]byte(s)); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// expect reads until a line starting with prefix arrives; it returns that line.
func (r *rawNATS) expect(prefix string) string {
	r.t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf []byte
	one := make([]byte, 1)
	for {
		n, err := r.conn.Read(one)
		if err != nil {
			r.t.Fatalf("waiting for %q: %v (got %q)", prefix, err, buf)
		}
		buf = append(buf, one[:n]...)
		if bytes.HasSuffix(buf, []byte("\r\n")) {
			line := string(buf)
			if strings.HasPrefix(line, prefix) {
				return strings.TrimSpace(line)
			}
			buf = buf[:0]
		}
	}
}

// closed reports whether the server side closed the connection within the timeout.
func (r *rawNATS) closed(timeout time.Duration) bool {
	_ = r.conn.SetReadDeadline(time.Now().Add(timeout))
	b := make([]byte, 512)
	for {
		if _, err := r.conn.Read(b); err != nil {
			return !isTimeout(err)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
