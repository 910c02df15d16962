package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func scramJAAS(user, pass string) map[string]string {
	return map[string]string{
		"security.protocol": "SASL_PLAINTEXT",
		"sasl.mechanism":    "SCRAM-SHA-512",
		"sasl.jaas.config":  fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, user, pass),
	}
}

// withJavaTLS turns a Java producer's SASL_PLAINTEXT configuration into SASL_SSL trusting the
// local CA (the gateway's certificate names 127.0.0.1, so hostname verification stays on).
func withJavaTLS(props map[string]string) map[string]string {
	props["security.protocol"] = "SASL_SSL"
	props["ssl.truststore.type"] = "PEM"
	props["ssl.truststore.location"] = tlsFile("ca.crt")
	return props
}

// librdkafkaSASL is librdkafka's configuration for a SASL mechanism over SASL_SSL (trusting the
// local CA) or SASL_PLAINTEXT.
func librdkafkaSASL(tls bool, conf map[string]string) map[string]string {
	conf["security.protocol"] = "SASL_PLAINTEXT"
	if tls {
		conf["security.protocol"] = "SASL_SSL"
		conf["ssl.ca.location"] = tlsFile("ca.crt")
	}
	return conf
}

// A connection through a SASL listener is attributed to the tenant whose saslPrincipals name
// the principal the broker accepted — whatever client.id it claims — for each mechanism and
// each client users run, over SASL_SSL (TLS from the client to the gateway and from the
// gateway to the broker) as production runs it, and over SASL_PLAINTEXT.
func TestKafkaSASLPrincipalAttributesOnceTheBrokerAccepts(t *testing.T) {
	type produce func(t *testing.T, topic, clientID string) clientRun
	const rate, secs = 50, 2
	// Each client claims, by its client.id, the other tenant's name.
	cases := []struct {
		name, tenant, claimed, clientID string
		run                             produce
	}{
		{"Java SASL_SSL SCRAM-SHA-512", "acme", "globex", "globex-claims-this", func(t *testing.T, topic, id string) clientRun {
			props := withJavaTLS(scramJAAS("acme-svc", "acme-svc-secret"))
			return javaProducerWith(t, addr(ports.KafkaSASLSSL), props, topic, id, rate, secs*time.Second, 100)
		}},
		{"librdkafka SASL_SSL PLAIN", "globex", "acme", "acme-claims-this", func(t *testing.T, topic, id string) clientRun {
			conf := librdkafkaSASL(true, map[string]string{"sasl.mechanism": "PLAIN", "sasl.username": "globex-svc", "sasl.password": "globex-svc-secret"})
			return librdkafkaProducerWith(t, addr(ports.KafkaSASLSSL), conf, topic, id, rate, secs*time.Second, 100)
		}},
		{"librdkafka SASL_SSL OAUTHBEARER", "acme", "globex", "globex-claims-this", func(t *testing.T, topic, id string) clientRun {
			// An unsecured JWT (alg none) whose sub is acme-svc: the local broker's validator takes it.
			conf := librdkafkaSASL(true, map[string]string{"sasl.mechanism": "OAUTHBEARER",
				"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": "principal=acme-svc"})
			return librdkafkaProducerWith(t, addr(ports.KafkaSASLSSL), conf, topic, id, rate, secs*time.Second, 100)
		}},
		{"librdkafka SASL_PLAINTEXT SCRAM-SHA-256", "globex", "acme", "acme-claims-this", func(t *testing.T, topic, id string) clientRun {
			conf := librdkafkaSASL(false, map[string]string{"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "globex-svc", "sasl.password": "globex-svc-secret"})
			return librdkafkaProducerWith(t, addr(ports.KafkaSASL), conf, topic, id, rate, secs*time.Second, 100)
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			labels := map[string]string{"protocol": "kafka", "tenant": c.tenant}
			claimed := map[string]string{"protocol": "kafka", "tenant": c.claimed}
			before, claimedBefore := metric(t, "weighstation_messages_accepted", labels), metric(t, "weighstation_messages_accepted", claimed)
			run := c.run(t, fmt.Sprintf("sasl-identity-%d", i), c.clientID)
			if run.sent == 0 || run.acked != run.sent {
				t.Fatalf("sent %d, acked %d, failed %d (%s)\n%s", run.sent, run.acked, run.failed, run.errors, run.log)
			}
			eventually(t, 5*time.Second, "the records are charged to "+c.tenant, func() bool {
				return metric(t, "weighstation_messages_accepted", labels)-before >= float64(run.sent)
			})
			if d := metric(t, "weighstation_messages_accepted", claimed) - claimedBefore; d != 0 {
				t.Errorf("the tenant its client.id claims was charged %.0f records", d)
			}
		})
	}
}

// The principal's tenant's limits apply over SASL_SSL: a record above acme's maxMessageBytes
// (256 KiB) from acme-svc is refused by the gateway with MESSAGE_TOO_LARGE, never stored.
func TestKafkaSASLPrincipalIsLimitedByItsTenantsPolicy(t *testing.T) {
	labels := map[string]string{"protocol": "kafka", "tenant": "acme", "reason": "size"}
	before := metric(t, "weighstation_messages_refused", labels)
	conf := librdkafkaSASL(true, map[string]string{"sasl.mechanism": "PLAIN", "sasl.username": "acme-svc", "sasl.password": "acme-svc-secret"})
	run := librdkafkaProducerWith(t, addr(ports.KafkaSASLSSL), conf, "sasl-too-large", "globex-claims-this", 2, time.Second, 300<<10)
	if run.sent == 0 || run.acked != 0 || !strings.Contains(run.errors, "MSG_SIZE_TOO_LARGE") {
		t.Errorf("300 KiB records for acme (max 256 KiB): sent %d, acked %d, errors %s", run.sent, run.acked, run.errors)
	}
	if d := metric(t, "weighstation_messages_refused", labels) - before; d < float64(run.sent) {
		t.Errorf("acme's size refusals rose by %.0f for %d oversized records", d, run.sent)
	}
}

// kafkaRequest frames one request (header v1: api key, version, correlation id, client id).
func kafkaRequest(apiKey, version int16, corr int32, body []byte) []byte {
	const clientID = "spoofer"
	f := binary.BigEndian.AppendUint32(nil, uint32(2+2+4+2+len(clientID)+len(body)))
	f = binary.BigEndian.AppendUint16(f, uint16(apiKey))
	f = binary.BigEndian.AppendUint16(f, uint16(version))
	f = binary.BigEndian.AppendUint32(f, uint32(corr))
	f = binary.BigEndian.AppendUint16(f, uint16(len(clientID)))
	return append(append(f, clientID...), body...)
}

// saslAuthenticate sends SaslAuthenticate v0 with these bytes, then (pipelined, before the
// answer) the frame then, if any, and returns the broker's error code and its auth bytes.
func saslAuthenticate(c net.Conn, r *bufio.Reader, corr int32, auth, then []byte) (int16, []byte, error) {
	body := binary.BigEndian.AppendUint32(nil, uint32(len(auth)))
	if _, err := c.Write(append(kafkaRequest(36, 0, corr, append(body, auth...)), then...)); err != nil {
		return 0, nil, err
	}
	resp, err := readKafkaFrame(r)
	if err != nil {
		return 0, nil, err
	}
	// correlation id, error_code, error_message (string), auth_bytes (bytes)
	code := int16(binary.BigEndian.Uint16(resp[4:]))
	msgLen := int(int16(binary.BigEndian.Uint16(resp[6:])))
	rest := resp[8+max(msgLen, 0):]
	return code, rest[4:], nil
}

func readKafkaFrame(r *bufio.Reader) ([]byte, error) {
	var size uint32
	if err := binary.Read(r, binary.BigEndian, &size); err != nil {
		return nil, err
	}
	frame := make([]byte, size)
	_, err := io.ReadFull(r, frame)
	return frame, err
}

// spoofedValue marks the records a spoofer tries to produce.
const spoofedValue = "spoofed"

// spoofProduce is a Produce request (v3, acks=all) of one record, spoofedValue, to partition 0
// of topic: what a spoofer pipelines behind its authentication, hoping it is forwarded before
// the broker's verdict.
func spoofProduce(corr int32, topic string) []byte {
	record := []byte{0}                      // attributes
	record = binary.AppendVarint(record, 0)  // timestamp delta
	record = binary.AppendVarint(record, 0)  // offset delta
	record = binary.AppendVarint(record, -1) // no key
	record = binary.AppendVarint(record, int64(len(spoofedValue)))
	record = append(record, spoofedValue...)
	record = binary.AppendVarint(record, 0) // no headers
	batch := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1,
		FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli(),
		Records: append(binary.AppendVarint(nil, int64(len(record))), record...)}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 3, -1, 5000
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = raw
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.Partitions = topic, []kmsg.ProduceRequestTopicPartition{part}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	return kafkaRequest(0, 3, corr, req.AppendTo(nil))
}

// spoofKafkaOnce authenticates as user with a wrong password over the SASL listener (PLAIN or
// SCRAM-SHA-512, speaking the protocol itself, as an attacker would), pipelining a Produce to
// topic behind its last SaslAuthenticate. It returns the broker's error code (non-zero when it
// refused) and whether the Produce was answered without error (it must never be).
func spoofKafkaOnce(user, mechanism, topic string) (int16, bool, error) {
	return pipelinedAuthProduce(user, "wrong", mechanism, topic)
}

// pipelinedAuthProduce is spoofKafkaOnce with a password of the caller's choice.
func pipelinedAuthProduce(user, password, mechanism, topic string) (int16, bool, error) {
	c, err := net.DialTimeout("tcp", addr(ports.KafkaSASL), time.Second)
	if err != nil {
		return 0, false, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	r := bufio.NewReader(c)
	handshake := binary.BigEndian.AppendUint16(nil, uint16(len(mechanism)))
	if _, err := c.Write(kafkaRequest(17, 1, 1, append(handshake, mechanism...))); err != nil {
		return 0, false, err
	}
	if _, err := readKafkaFrame(r); err != nil {
		return 0, false, err
	}
	var code int16
	if mechanism == "PLAIN" {
		code, _, err = saslAuthenticate(c, r, 2, []byte("\x00"+user+"\x00"+password), spoofProduce(3, topic))
	} else {
		var serverFirst []byte
		code, serverFirst, err = saslAuthenticate(c, r, 2, []byte("n,,n="+user+",r=spoofnonce"), nil)
		if err != nil || code != 0 {
			return code, false, err
		}
		nonce := ""
		for _, attr := range strings.Split(string(serverFirst), ",") {
			if v, ok := strings.CutPrefix(attr, "r="); ok {
				nonce = v
			}
		}
		proof := base64.StdEncoding.EncodeToString(make([]byte, 64))
		code, _, err = saslAuthenticate(c, r, 3, []byte("c=biws,r="+nonce+",p="+proof), spoofProduce(4, topic))
	}
	if err != nil {
		return code, false, err
	}
	// The broker closes a connection whose authentication failed: the Produce gets no answer.
	resp, err := readKafkaFrame(r)
	if err != nil {
		return code, false, nil
	}
	parsed := kmsg.NewPtrProduceResponse()
	parsed.Version = 3
	if perr := parsed.ReadFrom(resp[4:]); perr == nil && len(parsed.Topics) > 0 && len(parsed.Topics[0].Partitions) > 0 {
		return code, parsed.Topics[0].Partitions[0].ErrorCode == 0, nil
	}
	return code, false, nil
}

// spoofKafka claims user with a wrong password, over PLAIN and SCRAM-SHA-512 in turn, as fast
// as the broker answers, each time pipelining a Produce to topic behind it, until stop closes;
// done closes when it has stopped. It counts the broker's refusals and the Produce requests
// answered without error.
func spoofKafka(user, topic string, stop <-chan struct{}) (refused, produced *atomic.Int64, done <-chan struct{}) {
	refused, produced = new(atomic.Int64), new(atomic.Int64)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			code, ok, err := spoofKafkaOnce(user, []string{"PLAIN", "SCRAM-SHA-512"}[i%2], topic)
			if err == nil && code != 0 {
				refused.Add(1)
			}
			if ok {
				produced.Add(1)
			}
		}
	}()
	return refused, produced, finished
}

// A client that claims a tenant's SASL principal with a wrong secret charges no one: the broker
// refuses it, the refusal is counted, and the real tenant's producer loses nothing.
func TestKafkaSpooferWithAWrongSecretChargesNoTenant(t *testing.T) {
	const tenant = "spoof-victim"
	labels := map[string]string{"protocol": "kafka", "tenant": tenant}
	creds := scramJAAS(tenant, tenant+"-secret")
	// The topic exists before the measured run: a produce that creates it is retried by the
	// client, and the gateway counts what it forwarded.
	javaProducerWith(t, addr(ports.KafkaSASL), creds, "spoof-victim-orders", "victim", 10, time.Second, 100)
	failures0 := metric(t, "weighstation_auth_failures_total", map[string]string{"protocol": "kafka"})
	accepted0 := metric(t, "weighstation_messages_accepted", labels)
	refused0 := metricTotal(t, "weighstation_messages_refused", labels)
	stop := make(chan struct{})
	refused, produced, done := spoofKafka(tenant, "spoof-victim-orders", stop)
	conns := samplePeak(t, "weighstation_connections_active", "kafka", tenant)
	run := javaProducerWith(t, addr(ports.KafkaSASL), creds, "spoof-victim-orders", "victim", 200, 4*time.Second, 100)
	peak := conns.stop(t)
	close(stop)
	<-done
	t.Logf("victim: sent %d acked %d failed %d (%s); spoofer: refused %d times, its pipelined Produce answered %d times",
		run.sent, run.acked, run.failed, run.errors, refused.Load(), produced.Load())
	if produced.Load() != 0 {
		t.Errorf("%d of the spoofer's Produce requests were answered without error", produced.Load())
	}
	spoofed := 0
	for _, r := range topicRecords(t, "spoof-victim-orders") {
		if r == spoofedValue {
			spoofed++
		}
	}
	if spoofed != 0 {
		t.Errorf("the topic holds %d of the spoofer's records", spoofed)
	}
	// The spoofer's pipelined Produce is one the broker takes: with the right password it is
	// answered without error (so its never being answered above was the broker's refusal).
	if code, ok, err := pipelinedAuthProduce(tenant, tenant+"-secret", "PLAIN", "spoof-victim-orders"); err != nil || code != 0 || !ok {
		t.Errorf("the right password with a pipelined Produce: code %d, produced %v, %v", code, ok, err)
	}
	if run.failed != 0 || run.acked != run.sent {
		t.Errorf("the real tenant lost records: sent %d, acked %d, failed %d (%s)", run.sent, run.acked, run.failed, run.errors)
	}
	// The Java producer holds two connections (bootstrap and broker); every spoofer connection
	// attributed to the tenant would show here.
	if peak > 2 {
		t.Errorf("tenant %s had up to %.0f connections; its producer opens 2", tenant, peak)
	}
	eventually(t, 5*time.Second, "the victim's records are counted", func() bool {
		return metric(t, "weighstation_messages_accepted", labels)-accepted0 >= float64(run.acked)
	})
	// The gateway charges what it forwards. When the broker stalls (the spoofer's SCRAM
	// exchanges cost it CPU), records pile up in the producer and may come in a burst the
	// tenant's bucket refuses; the producer sends them again, with the batches in flight behind
	// them, and those are charged again. None of it is the spoofer's.
	d := metric(t, "weighstation_messages_accepted", labels) - accepted0
	t.Logf("tenant %s: charged for %.0f records, %.0f refused and sent again, %d acknowledged; at most %.0f connections",
		tenant, d, metricTotal(t, "weighstation_messages_refused", labels)-refused0, run.acked, peak)
	if d < float64(run.acked) {
		t.Errorf("tenant %s charged for %.0f records, fewer than the %d acknowledged", tenant, d, run.acked)
	}
	failures := metric(t, "weighstation_auth_failures_total", map[string]string{"protocol": "kafka"}) - failures0
	if refused.Load() == 0 || failures < float64(refused.Load()) {
		t.Errorf("weighstation_auth_failures_total{protocol=kafka} rose by %.0f for %d refused authentications", failures, refused.Load())
	}
}
