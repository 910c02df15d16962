package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What a tenant may read and write, with the clients users run, through the gateway's
// plaintext listener (the broker sees the gateway, not the tenant): initech may produce to,
// consume from and create only initech.* topics, join only initech-* groups and use only
// initech-tx-* transactional ids (testdata/tenants.yaml). Each client raises the error a broker
// with ACLs makes it raise; globex, with no lists, is unaffected. What reached the broker is
// read from the broker directly.
func TestKafkaDataIsAuthorizedPerTenant(t *testing.T) {
	ours, theirs := "initech.authz-data", "globex.authz-data"
	direct := directAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, topic := range []string{ours, theirs} {
		if _, err := direct.CreateTopic(ctx, 1, 1, nil, topic); err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			t.Fatal(err)
		}
	}
	refusedBefore := metricTotal(t, "weighstation_messages_refused", map[string]string{"tenant": "initech", "reason": "permission"})

	initech := authzProbe(t, "initech-java",
		"produce:"+ours, "produce:"+theirs,
		"consume:"+ours+":initech-readers", "consume:"+theirs+":initech-readers", "consume:"+ours+":globex-readers",
		"txn:initech-tx-1:"+ours, "txn:globex-tx-1:"+ours, "txn:initech-tx-2:"+theirs,
		"list", "describe:"+ours, "describe:"+theirs, "create:initech.authz-created", "create:globex.authz-created", "delete:"+theirs, "quota")
	for op, want := range map[string]string{
		"produce:" + ours:                      "ok",
		"produce:" + theirs:                    "TopicAuthorizationException",
		"consume:" + ours + ":initech-readers": "ok",
		// The topic is refused in Metadata: the consumer raises at once, before any group.
		"consume:" + theirs + ":initech-readers": "TopicAuthorizationException",
		"consume:" + ours + ":globex-readers":    "GroupAuthorizationException",
		"txn:initech-tx-1:" + ours:               "ok",
		"txn:globex-tx-1:" + ours:                "TransactionalIdAuthorizationException",
		"txn:initech-tx-2:" + theirs:             "TopicAuthorizationException",
		"list":                                   "ok",
		"describe:" + ours:                       "ok",
		"describe:" + theirs:                     "TopicAuthorizationException",
		"create:initech.authz-created":           "ok",
		"create:globex.authz-created":            "TopicAuthorizationException",
		"delete:" + theirs:                       "TopicAuthorizationException",
		"quota":                                  "ClusterAuthorizationException",
	} {
		if got := initech[op].outcome; got != want {
			t.Errorf("initech %s: got %q, want %q", op, got, want)
		}
	}
	if listed := initech["list"].topics; !listed[ours] || listed[theirs] {
		t.Errorf("initech lists topics %v: want %s and not %s", keys(listed), ours, theirs)
	}

	// A client that skips Metadata (sarama's Broker, pinned to the gateway) is refused at the
	// Produce and the Fetch themselves, per partition, beside a partition it may use.
	pinnedProduceAndFetch(t, ours, theirs)
	fetchByTopicIDIsNotPassed(t, theirs)

	// librdkafka and franz-go: each record to globex's topic reported refused, none stored.
	rdk := librdkafkaProducer(t, theirs, "initech-rdk", 10, time.Second, 100)
	if rdk.acked != 0 || !strings.Contains(rdk.errors, "TOPIC_AUTHORIZATION_FAILED") {
		t.Errorf("librdkafka to %s: acked %d, errors %q: want none acked, TOPIC_AUTHORIZATION_FAILED", theirs, rdk.acked, rdk.errors)
	}
	if own := librdkafkaProducer(t, ours, "initech-rdk", 10, time.Second, 100); own.acked != own.sent || own.sent == 0 {
		t.Errorf("librdkafka to %s: %d of %d acked (%s)", ours, own.acked, own.sent, own.errors)
	}
	if err := franzProduceOne(t, "initech-franz", theirs); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("franz-go to %s: %v, want TOPIC_AUTHORIZATION_FAILED", theirs, err)
	}
	if err := franzProduceOne(t, "initech-franz", ours); err != nil {
		t.Errorf("franz-go to %s: %v", ours, err)
	}
	if err := franzJoin(t, "initech-franz", ours, "globex-franz-readers"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("franz-go joining globex-franz-readers: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// globex, with no lists, does all of it on its own topic and sees initech's too.
	globex := authzProbe(t, "globex-java", "produce:"+theirs, "consume:"+theirs+":globex-readers", "txn:globex-tx-1:"+theirs, "list")
	for _, op := range []string{"produce:" + theirs, "consume:" + theirs + ":globex-readers", "txn:globex-tx-1:" + theirs, "list"} {
		if got := globex[op].outcome; got != "ok" {
			t.Errorf("globex %s: got %q, want ok", op, got)
		}
	}
	if listed := globex["list"].topics; !listed[ours] || !listed[theirs] {
		t.Errorf("globex lists topics %v: want both", keys(listed))
	}

	// On the broker: globex's topic holds globex's records only, and nothing was created for
	// initech outside its own names.
	topics, err := direct.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !topics.Has(theirs) || topics.Has("globex.authz-created") || !topics.Has("initech.authz-created") {
		t.Errorf("broker topics: %s exists %v, globex.authz-created %v (want false), initech.authz-created %v (want true)",
			theirs, topics.Has(theirs), topics.Has("globex.authz-created"), topics.Has("initech.authz-created"))
	}
	// globex's record, its transaction's record and that transaction's commit marker.
	if n := offsetsIn(t, theirs); n != 3 {
		t.Errorf("%s holds %d offsets, want globex's 3 (a record, a transaction's record and its commit marker)", theirs, n)
	}
	if refused := metricTotal(t, "weighstation_messages_refused", map[string]string{"tenant": "initech", "reason": "permission"}) - refusedBefore; refused < pinnedRecords {
		t.Errorf("initech's permission refusals counted: %v, want at least the pinned Produce's %d records and each refused request", refused, pinnedRecords)
	}
	_, _ = direct.DeleteTopics(context.Background(), ours, theirs, "initech.authz-created")
}

type probeOutcome struct {
	outcome string
	detail  string
	topics  map[string]bool // list's detail
}

var (
	authzProbeBuild sync.Once
	authzProbeDir   string
	authzProbeErr   error
	probeOutcomeRE  = regexp.MustCompile(`(?m)^op=(\S+) outcome=(\S+)(?: detail=(\S*))?$`)
)

// authzProbe runs clients/java/AuthzProbe.java as clientID: each operation's outcome.
func authzProbe(t *testing.T, clientID string, ops ...string) map[string]probeOutcome {
	t.Helper()
	libs := filepath.Join(root, ".tools/kafka/libs/*")
	authzProbeBuild.Do(func() {
		authzProbeDir, authzProbeErr = os.MkdirTemp("", "weighstation-authz-probe-")
		if authzProbeErr == nil {
			if out, err := exec.Command("javac", "-d", authzProbeDir, "-cp", libs, "clients/java/AuthzProbe.java").CombinedOutput(); err != nil {
				authzProbeErr = errors.New("javac: " + err.Error() + "\n" + string(out))
			}
		}
	})
	if authzProbeErr != nil {
		t.Fatal(authzProbeErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"-Xmx256m", "-Dorg.apache.logging.log4j.level=ERROR", "-cp",
		authzProbeDir + string(os.PathListSeparator) + libs, "AuthzProbe", addr(ports.Kafka), clientID}, ops...)
	out, err := exec.CommandContext(ctx, "java", args...).Output()
	if err != nil {
		t.Fatalf("AuthzProbe: %v\n%s", err, out)
	}
	outcomes := map[string]probeOutcome{}
	for _, m := range probeOutcomeRE.FindAllStringSubmatch(string(out), -1) {
		o := probeOutcome{outcome: m[2], detail: m[3], topics: map[string]bool{}}
		for _, topic := range strings.Split(m[3], ",") {
			o.topics[topic] = true
		}
		outcomes[m[1]] = o
	}
	if len(outcomes) != len(ops) {
		t.Fatalf("AuthzProbe reported %d of %d operations:\n%s", len(outcomes), len(ops), out)
	}
	return outcomes
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// franzProduceOne produces one record with franz-go: the error its produce reports.
func franzProduceOne(t *testing.T, clientID, topic string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr(ports.Kafka)), kgo.ClientID(clientID),
		kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("authz")}).FirstErr()
}

// franzJoin joins a consumer group with franz-go: the first error its polls report.
func franzJoin(t *testing.T, clientID, topic, group string) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr(ports.Kafka)), kgo.ClientID(clientID),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return fe.Err
			}
		}
	}
	return ctx.Err()
}

// offsetsIn counts a topic's offsets (records and transaction markers) on the broker directly.
func offsetsIn(t *testing.T, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := directAdmin(t)
	starts, err := admin.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := admin.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok {
			n += o.Offset - s.Offset
		}
	})
	return n
}

// pinnedRecords: the records of the pinned Produce (two partitions' worth).
const pinnedRecords = 10

// pinnedProduceAndFetch sends initech's Produce and Fetch naming both topics straight to the
// gateway: globex's partition is answered TOPIC_AUTHORIZATION_FAILED; initech's own, in the
// same refused request, is told to retry (Produce: THROTTLING_QUOTA_EXCEEDED) or given nothing
// (Fetch), and then passes alone.
func pinnedProduceAndFetch(t *testing.T, ours, theirs string) {
	t.Helper()
	b := sarama.NewBroker(addr(ports.Kafka))
	if err := b.Open(kafkaConfig("initech-pinned")); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	produce := func(topics ...string) *sarama.ProduceResponse {
		now := time.Now()
		req := &sarama.ProduceRequest{RequiredAcks: sarama.WaitForAll, Timeout: 10000, Version: 7}
		for _, topic := range topics {
			batch := &sarama.RecordBatch{Version: 2, FirstTimestamp: now, MaxTimestamp: now,
				ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, LastOffsetDelta: pinnedRecords/2 - 1}
			for r := 0; r < pinnedRecords/2; r++ {
				batch.Records = append(batch.Records, &sarama.Record{OffsetDelta: int64(r), Value: []byte("pinned")})
			}
			req.AddBatch(topic, 0, batch)
		}
		resp, err := b.Produce(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := produce(ours, theirs)
	if got := resp.GetBlock(theirs, 0); got == nil || got.Err != sarama.ErrTopicAuthorizationFailed {
		t.Errorf("pinned Produce to %s: %+v, want TOPIC_AUTHORIZATION_FAILED", theirs, got)
	}
	if got := resp.GetBlock(ours, 0); got == nil || got.Err != sarama.ErrThrottlingQuotaExceeded {
		t.Errorf("pinned Produce to %s beside %s: %+v, want THROTTLING_QUOTA_EXCEEDED (retry)", ours, theirs, got)
	}
	if got := produce(ours).GetBlock(ours, 0); got == nil || got.Err != sarama.ErrNoError {
		t.Errorf("pinned Produce to %s alone: %+v, want it stored", ours, got)
	}

	fetch := &sarama.FetchRequest{Version: 11, MaxWaitTime: 100, MinBytes: 1, MaxBytes: 1 << 20}
	fetch.AddBlock(ours, 0, 0, 1<<20, -1)
	fetch.AddBlock(theirs, 0, 0, 1<<20, -1)
	fr, err := b.Fetch(fetch)
	if err != nil {
		t.Fatal(err)
	}
	if got := fr.GetBlock(theirs, 0); got == nil || got.Err != sarama.ErrTopicAuthorizationFailed {
		t.Errorf("pinned Fetch of %s: %+v, want TOPIC_AUTHORIZATION_FAILED", theirs, got)
	}
	if got := fr.GetBlock(ours, 0); got == nil || got.Err != sarama.ErrNoError || got.HighWaterMarkOffset != -1 {
		t.Errorf("pinned Fetch of %s beside %s: %+v, want no error and nothing (high watermark -1)", ours, theirs, got)
	}
}

// fetchByTopicIDIsNotPassed sends initech's Fetch v13, which names topics by id (the gateway
// advertises Fetch up to v12, by name), for globex's topic: the gateway cannot decide it
// against initech's consume list, so it closes the connection instead of passing it.
func fetchByTopicIDIsNotPassed(t *testing.T, theirs string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	details, err := directAdmin(t).ListTopics(ctx, theirs)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewFetchRequest()
	req.SetVersion(13)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 100, 1, 1<<20
	topic := kmsg.NewFetchRequestTopic()
	topic.TopicID = details[theirs].ID
	part := kmsg.NewFetchRequestTopicPartition()
	part.PartitionMaxBytes = 1 << 20
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	frame := []byte{0, 0, 0, 0, 0, 1, 0, 13, 0, 0, 0, 1} // size, Fetch, v13, correlation id 1
	frame = append(frame, 0, 11)
	frame = append(frame, "initech-raw"...)
	frame = append(frame, 0) // no header tags
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	conn, err := net.DialTimeout("tcp", addr(ports.Kafka), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(make([]byte, 1<<16))
	var timeout net.Error
	// Closed: EOF, or a reset if the close raced the request's bytes.
	if n > 0 || err == nil || errors.As(err, &timeout) && timeout.Timeout() {
		t.Errorf("Fetch v13 of %s by topic id: read %d bytes, %v; want the connection closed", theirs, n, err)
	}
}
