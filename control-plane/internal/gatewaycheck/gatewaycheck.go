// Package gatewaycheck dials the gateway as a client would and sees a limit refuse it: what
// `weighstation check` does, and so the chart's `helm test` pod. A client that no policy
// identifies belongs to the default tenant; the gateway tells a NATS client that tenant's
// maxMessageBytes as max_payload, and a message one byte larger is refused, on NATS and Kafka
// alike, before it reaches a broker.
package gatewaycheck

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrNoSession: the connection failed or ended before the server's INFO came through the
// gateway (no server reachable from it).
var ErrNoSession = errors.New("no NATS session through the gateway")

// NATS connects to addr (as user, when not empty: where nats-server requires credentials),
// reads the max_payload the gateway tells it, checks that PING is answered, and publishes one
// byte more than max_payload: the gateway must refuse it with nats-server's own -ERR. It
// returns max_payload.
func NATS(ctx context.Context, addr, user, password string) (int, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, fmt.Errorf("nats %s: %w: %v", addr, ErrNoSession, err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	r := bufio.NewReader(conn)
	maxPayload := 0
	takeInfo := func(line string) error {
		var info struct {
			MaxPayload int `json:"max_payload"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info); err != nil {
			return fmt.Errorf("nats %s: bad INFO %q: %w", addr, line, err)
		}
		maxPayload = info.MaxPayload
		return nil
	}
	// next reads the server's next line, taking in INFO (the gateway tells the tenant's
	// max_payload in a new INFO once CONNECT has identified the client) and answering PING.
	next := func() (string, error) {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return line, err
			}
			switch {
			case strings.HasPrefix(line, "INFO "):
				if err := takeInfo(line); err != nil {
					return line, err
				}
			case strings.TrimSpace(line) == "PING":
				if _, err := fmt.Fprint(conn, "PONG\r\n"); err != nil {
					return line, err
				}
			default:
				return line, nil
			}
		}
	}
	// As every client: the server's INFO first (the gateway signs CONNECT with its nonce).
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("nats %s: %w: no INFO (%v)", addr, ErrNoSession, err)
	}
	if !strings.HasPrefix(line, "INFO ") {
		return 0, fmt.Errorf("nats %s: %q first, not INFO", addr, line)
	}
	if err := takeInfo(line); err != nil {
		return 0, err
	}
	connect := map[string]any{"verbose": false, "pedantic": false, "name": "weighstation-check"}
	if user != "" {
		connect["user"], connect["pass"] = user, password
	}
	body, _ := json.Marshal(connect)
	if _, err := fmt.Fprintf(conn, "CONNECT %s\r\nPING\r\n", body); err != nil {
		return 0, err
	}
	if line, err = next(); err != nil || strings.TrimSpace(line) != "PONG" {
		return 0, fmt.Errorf("nats %s: PING answered %q (%v), not PONG", addr, line, err)
	}
	if maxPayload <= 0 {
		return 0, fmt.Errorf("nats %s: no INFO with max_payload", addr)
	}
	// The PUB line declares the size, and the gateway refuses it from that, as nats-server does,
	// then closes: the payload is never sent (writing it would race the close).
	size := maxPayload + 1
	if _, err := fmt.Fprintf(conn, "PUB weighstation.check %d\r\n", size); err != nil {
		return 0, err
	}
	line, err = next()
	if err != nil || !strings.HasPrefix(line, "-ERR") || !strings.Contains(line, "Maximum Payload") {
		return 0, fmt.Errorf("nats %s: a message of max_payload+1 (%d) bytes was not refused: %q (%v)", addr, size, line, err)
	}
	return maxPayload, nil
}

// Kafka sends addr one Produce of a record of size bytes: the gateway must answer
// MESSAGE_TOO_LARGE itself (the topic need not exist: the request never reaches a broker).
func Kafka(ctx context.Context, addr string, size int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("weighstation-check"))
	if err != nil {
		return err
	}
	defer cl.Close()
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return fmt.Errorf("kafka %s: no seed broker", addr)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "weighstation-check"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, OneRecordBatch(make([]byte, size), time.Now())
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, seeds[0])
	if err != nil {
		return fmt.Errorf("kafka %s: produce: %w", addr, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("kafka %s: produce answered %d topics", addr, len(resp.Topics))
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; kerr.ErrorForCode(code) != kerr.MessageTooLarge {
		return fmt.Errorf("kafka %s: a record of %d bytes was answered %v, not MESSAGE_TOO_LARGE", addr, size, kerr.ErrorForCode(code))
	}
	return nil
}
