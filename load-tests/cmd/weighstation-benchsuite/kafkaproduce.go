package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Produce driver: one connection to one address, never following the broker's metadata.
// Kafka's own clients reconnect to whatever broker address the metadata names — behind a plain
// tcp_proxy that is the gateway's listener, which the broker advertises — so only a client
// pinned to its connection measures Envoy without the filter.
const (
	// produceVersion is the newest Produce version the filter parses (v13 names topics by id);
	// it is what Kafka 4 clients send through the gateway.
	produceVersion  = 12
	metadataVersion = 12
	// kafkaInFlight bounds the unanswered requests, as the Java producer's
	// max.in.flight.requests.per.connection (5) does.
	kafkaInFlight = 5
	// maxBatchBytes keeps a batch within the broker's default message.max.bytes and the
	// benchmark tenant's maxMessageBytes (1 MiB).
	maxBatchBytes = 1 << 20
	produceTopic  = "weighstation-cpu-produce"
	topicWait     = 30 * time.Second
)

// produceOnOneConnection sends `requests` Produce requests (acks=1) to addr as clientID, each carrying one
// record batch of `records` records of `size` bytes to partition 0 of topic, with at most kafkaInFlight
// unanswered, checks that every partition of every response has error code 0, and returns
// requests per second. No SASL: the broker listener behind both the gateway's Kafka listener
// and its plain tcp_proxy is the one that admits the gateway's client certificate, and the
// gateway tells the tenant by the client id (acme-…) alone.
func produceOnOneConnection(ctx context.Context, addr, clientID, topic string, records, size, requests int) (float64, error) {
	batch := recordBatch(records, size, time.Now().UnixMilli())
	if len(batch) > maxBatchBytes {
		return 0, fmt.Errorf("a batch of %d × %d B is %d bytes, over %d", records, size, len(batch), maxBatchBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	k, err := openPinned(ctx, addr, clientID, topic, 64<<10)
	if err != nil {
		return 0, err
	}
	defer k.conn.Close()
	conn := k.conn
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = produceVersion, 1, 30_000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
	// Encoded once: each send only rewrites the correlation id (bytes 8–11: after the length,
	// API key and version).
	wire := k.format.AppendRequest(nil, req, 0)

	slots := make(chan struct{}, kafkaInFlight)
	answered := make(chan error, 1)
	go func() {
		for i := range requests {
			if err := k.produced(int32(i + 1)); err != nil {
				answered <- fmt.Errorf("request %d of %d: %w", i+1, requests, err)
				return
			}
			<-slots
		}
		answered <- nil
	}()
	start := time.Now()
	for i := range requests {
		select {
		case slots <- struct{}{}:
		case err := <-answered:
			return 0, err
		}
		binary.BigEndian.PutUint32(wire[8:], uint32(i+1))
		if _, err := conn.Write(wire); err != nil {
			return 0, err
		}
	}
	if err := <-answered; err != nil {
		return 0, err
	}
	return float64(requests) / time.Since(start).Seconds(), nil
}

// openPinned opens a driver's one connection to addr as clientID, bounded by ctx's deadline and
// reading through a buffer of `buffer` bytes, once topic's partition 0 has a leader.
func openPinned(ctx context.Context, addr, clientID, topic string, buffer int) (*kafkaConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	k := &kafkaConn{conn: conn, in: bufio.NewReaderSize(conn, buffer), format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, err
	}
	if err := k.awaitTopic(ctx, topic); err != nil {
		conn.Close()
		return nil, err
	}
	return k, nil
}

// kafkaConn is one client connection: requests written in order, responses read in order.
type kafkaConn struct {
	conn   net.Conn
	in     *bufio.Reader
	format *kmsg.RequestFormatter
	frame  []byte
}

// awaitTopic asks for the topic's metadata, letting the broker create it, until its partition
// 0 has a leader (a new topic answers LEADER_NOT_AVAILABLE first).
func (k *kafkaConn) awaitTopic(ctx context.Context, topic string) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = metadataVersion, true
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{t}
	give := time.Now().Add(topicWait)
	for {
		if _, err := k.conn.Write(k.format.AppendRequest(nil, req, 0)); err != nil {
			return err
		}
		body, err := k.response(0, req.IsFlexible())
		if err != nil {
			return err
		}
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = req.Version
		if err := resp.ReadFrom(body); err != nil {
			return fmt.Errorf("metadata response: %w", err)
		}
		why := "no such topic in the answer"
		if len(resp.Topics) == 1 {
			rt := resp.Topics[0]
			switch {
			case rt.ErrorCode != 0:
				why = fmt.Sprintf("topic error %d", rt.ErrorCode)
			case len(rt.Partitions) == 0 || rt.Partitions[0].ErrorCode != 0 || rt.Partitions[0].Leader < 0:
				why = "partition 0 has no leader yet"
			default:
				return nil
			}
		}
		if time.Now().After(give) {
			return fmt.Errorf("topic %s not ready after %s: %s", topic, topicWait, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// produced reads the next response, which must answer correlation id `id` with no error for
// any partition.
func (k *kafkaConn) produced(id int32) error {
	body, err := k.response(id, true) // Produce v9+ responses have a flexible header
	if err != nil {
		return err
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = produceVersion
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("produce response: %w", err)
	}
	if len(resp.Topics) == 0 {
		return errors.New("produce response names no topic")
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				msg := ""
				if p.ErrorMessage != nil {
					msg = ": " + *p.ErrorMessage
				}
				return fmt.Errorf("%s partition %d: error code %d%s", t.Topic, p.Partition, p.ErrorCode, msg)
			}
		}
	}
	return nil
}

// response reads one response frame, checks its correlation id, and returns its body (after
// the header's tagged fields when the header is flexible). The body is valid until the next
// call.
func (k *kafkaConn) response(id int32, flexibleHeader bool) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(k.in, size[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n < 4 {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	if cap(k.frame) < n {
		k.frame = make([]byte, n)
	}
	k.frame = k.frame[:n]
	if _, err := io.ReadFull(k.in, k.frame); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(k.frame)); got != id {
		return nil, fmt.Errorf("response to correlation id %d, expected %d", got, id)
	}
	body := k.frame[4:]
	if !flexibleHeader {
		return body, nil
	}
	return skipTaggedFields(body)
}

// skipTaggedFields skips a flexible header's tagged fields: a count, then each field's tag,
// size and bytes, all unsigned varints but the bytes.
func skipTaggedFields(b []byte) ([]byte, error) {
	fields, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("truncated tagged fields")
	}
	b = b[n:]
	for range fields {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, errors.New("truncated tagged field")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < size {
			return nil, errors.New("truncated tagged field")
		}
		b = b[n+int(size):]
	}
	return b, nil
}
