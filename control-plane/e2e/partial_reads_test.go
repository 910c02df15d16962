package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The filter reads the headers of what passes, never the payloads: its scanners ask Envoy for
// the bytes at the offsets the protocol gives (wasm-filter/core/src/source.rs). These tests hold
// the scanners' model of Envoy's buffer to real Envoy: messages of mixed sizes up to the tenant's
// maxMessageBytes, written in pieces cut at every kind of place a header can be cut, must all
// arrive byte for byte and in order, and what the gateway counts for them (sizes taken from
// headers) must be what was sent.

// partialNATSTenant has a 64 KiB maxMessageBytes and no limit outside slow.> (testdata/tenants.yaml).
const partialNATSTenant = "override"

// partialSizes: empty, tiny, both sides of the scanners' read-through size (4 KiB) and of 16 KiB
// and 64 KiB, up to the tenant's maxMessageBytes.
var partialSizes = []int{0, 1, 2, 127, 128, 255, 256, 4095, 4096, 4097, 16383, 16384, 16385, 65535, 65536}

// partialPayload is message i's payload of n bytes: every byte value, CR and LF among them, and a
// PUB line inside, so a scanner that read a payload as protocol would be caught.
func partialPayload(i, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte((i*31 + j) % 251)
	}
	copy(p[n/2:], "\r\nPUB x 5\r\n")
	return p
}

// natsCuts are where one operation's writes end: inside the operation name and the subject,
// before and between the CR and LF ending the line, after the line, inside the payload, and
// before and between the CR and LF ending the payload.
func natsCuts(line, payload int) []int {
	cuts := []int{2, 6, line - 2, line - 1, line}
	if payload > 2 {
		cuts = append(cuts, line+1, line+payload/2)
	}
	return append(cuts, line+payload, line+payload+1)
}

// writeInPieces writes b cut at the offsets given (ascending, within b), pausing between the
// pieces so that Envoy reads them apart.
func writeInPieces(t *testing.T, c net.Conn, b []byte, cuts []int) {
	t.Helper()
	last := 0
	for _, cut := range append(cuts, len(b)) {
		if cut <= last || cut > len(b) {
			continue
		}
		if _, err := c.Write(b[last:cut]); err != nil {
			t.Fatalf("write: %v", err)
		}
		last = cut
		time.Sleep(2 * time.Millisecond)
	}
}

// sentNATS is one message as sent and as it must arrive.
type sentNATS struct {
	header  string // the X-Partial header of an HPUB, "" for a PUB
	payload []byte
}

func (m sentNATS) wire(subject string) (line, op []byte) {
	if m.header == "" {
		line = fmt.Appendf(nil, "PUB %s %d\r\n", subject, len(m.payload))
		return line, append(append(append([]byte{}, line...), m.payload...), "\r\n"...)
	}
	headers := "NATS/1.0\r\nX-Partial: " + m.header + "\r\n\r\n"
	line = fmt.Appendf(nil, "HPUB %s %d %d\r\n", subject, len(headers), len(headers)+len(m.payload))
	op = append(append([]byte{}, line...), headers...)
	return line, append(append(op, m.payload...), "\r\n"...)
}

// bytesCounted is what the gateway counts for the message: headers and payload.
func (m sentNATS) bytesCounted(subject string) int {
	line, op := m.wire(subject)
	return len(op) - len(line) - 2
}

// mixedNATS: every size as a PUB and as an HPUB, then a burst of small ones.
func mixedNATS(burst int) []sentNATS {
	var out []sentNATS
	for i, n := range partialSizes {
		out = append(out, sentNATS{payload: partialPayload(i, n)})
		if n < 65536-64 { // headers count against maxMessageBytes too
			out = append(out, sentNATS{header: fmt.Sprint(i), payload: partialPayload(i+1000, n)})
		}
	}
	for i := range burst {
		out = append(out, sentNATS{payload: partialPayload(2000+i, i%300)})
	}
	return out
}

func receiveExactly(t *testing.T, s *nats.Subscription, want []sentNATS) {
	t.Helper()
	for i, w := range want {
		m, err := s.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("message %d of %d (%d B): %v", i+1, len(want), len(w.payload), err)
		}
		if !bytes.Equal(m.Data, w.payload) {
			t.Fatalf("message %d (%d B) arrived as %d B, altered", i+1, len(w.payload), len(m.Data))
		}
		if got := m.Header.Get("X-Partial"); got != w.header {
			t.Fatalf("message %d: header X-Partial %q, want %q", i+1, got, w.header)
		}
	}
	if extra, err := s.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("a message more than was sent arrived: %d B", len(extra.Data))
	}
}

func TestPartialReadsPublishesCutAtEveryBoundaryArriveWhole(t *testing.T) {
	subject := uniqueSubject("partial.pub")
	sub := directNATS(t)
	s, err := sub.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	labels := natsLabels(partialNATSTenant)
	messagesBefore := metric(t, "weighstation_messages_accepted", labels)
	bytesBefore := metric(t, "weighstation_bytes_accepted", labels)

	raw := dialRawNATS(t, fmt.Sprintf(`{"verbose":false,"headers":true,"user":%q,"pass":%q}`,
		partialNATSTenant, partialNATSTenant+"-secret"))
	msgs := mixedNATS(2000)
	counted := 0
	var burst []byte
	for i, m := range msgs {
		line, op := m.wire(subject)
		counted += m.bytesCounted(subject)
		if i >= len(msgs)-2000 {
			burst = append(burst, op...) // thousands of operations in one write
			continue
		}
		writeInPieces(t, raw.conn, op, natsCuts(len(line), len(op)-len(line)-2))
	}
	writeInPieces(t, raw.conn, burst, nil)
	raw.send("PING\r\n")
	raw.expect("PONG")

	receiveExactly(t, s, msgs)
	eventually(t, 5*time.Second, "the counters are what was sent", func() bool {
		return metric(t, "weighstation_messages_accepted", labels) == messagesBefore+float64(len(msgs)) &&
			metric(t, "weighstation_bytes_accepted", labels) == bytesBefore+float64(counted)
	})
}

func TestPartialReadsDeliveriesOfMixedSizesArriveWhole(t *testing.T) {
	subject := uniqueSubject("partial.sub")
	sub := gatewayNATS(t, partialNATSTenant, partialNATSTenant+"-secret")
	s, err := sub.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := directNATS(t)
	msgs := mixedNATS(2000)
	for _, m := range msgs {
		out := &nats.Msg{Subject: subject, Data: m.payload}
		if m.header != "" {
			out.Header = nats.Header{"X-Partial": []string{m.header}}
		}
		if err := pub.PublishMsg(out); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	receiveExactly(t, s, msgs)
}

// splitWrites cuts each write of a Kafka client (franz-go writes a request at a time) where a
// header can fall: inside the size, the request header, the Produce's topic and partition
// headers, the record batch's header, the records, and before the last byte.
type splitWrites struct{ net.Conn }

func (c splitWrites) Write(b []byte) (int, error) {
	written := 0
	for _, cut := range []int{2, 6, 11, 25, 48, 90, 130, 200, len(b) / 2, len(b) - 1, len(b)} {
		if cut <= written || cut > len(b) {
			continue
		}
		n, err := c.Conn.Write(b[written:cut])
		written += n
		if err != nil {
			return written, err
		}
		time.Sleep(time.Millisecond)
	}
	return written, nil
}

func TestPartialReadsProducesCutAtEveryBoundaryAreStoredWhole(t *testing.T) {
	topic := strings.ReplaceAll(uniqueSubject("partial-produce"), ".", "-")
	// window-bound: maxMessageBytes 1 MiB, 2,000 records/s (testdata/tenants.yaml).
	const clientID = "window-bound-partial"
	labels := map[string]string{"protocol": "kafka", "tenant": "window-bound"}
	before := metric(t, "weighstation_messages_accepted", labels)
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return splitWrites{c}, nil
	}
	client, err := kgo.NewClient(
		kgo.SeedBrokers(addr(ports.Kafka)),
		kgo.ClientID(clientID),
		kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.Dialer(dial),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var want []string
	produce := func(value []byte) *kgo.Record {
		want = append(want, string(value))
		return &kgo.Record{Value: value}
	}
	// One record a batch, each size; then batches of many small records.
	for i, n := range append(partialSizes, 200_000, 512<<10) {
		if err := client.ProduceSync(ctx, produce(partialPayload(i, n))).FirstErr(); err != nil {
			t.Fatalf("a record of %d B: %v", n, err)
		}
	}
	var records []*kgo.Record
	for i := range 600 {
		records = append(records, produce(partialPayload(5000+i, i%300)))
	}
	if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("600 small records: %v", err)
	}

	got := topicRecords(t, topic)
	if len(got) != len(want) {
		t.Fatalf("the topic holds %d records; %d were acknowledged", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d (%d B) is stored as %d B, altered or out of order", i, len(want[i]), len(got[i]))
		}
	}
	eventually(t, 5*time.Second, "the records counted are the records sent", func() bool {
		return metric(t, "weighstation_messages_accepted", labels) == before+float64(len(want))
	})
}
