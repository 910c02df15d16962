package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A JetStream publisher over its rate limit (reject) gets an error from js.Publish at once —
// the stream's no-responders answer — not a timeout, and the async Permissions Violation names
// the limit. What was acknowledged is exactly what the stream holds.
func TestNATSJetStreamPublishRefusalIsAnErrorNotATimeout(t *testing.T) {
	subject := uniqueSubject("jsrefuse")
	stream := strings.ReplaceAll(subject, ".", "_")
	admin, err := directNATS(t).JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddStream(&nats.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: nats.MemoryStorage}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	t.Cleanup(func() { _ = admin.DeleteStream(stream) })

	sink := &errorSink{}
	js, err := tenantNATS(t, "rate-reject", sink).JetStream()
	if err != nil {
		t.Fatal(err)
	}
	// Asynchronous publishes outrun the limit (a synchronous loop on this machine does not).
	const sent = 100
	futures := make([]nats.PubAckFuture, 0, sent)
	start := time.Now()
	for i := 0; i < sent; i++ {
		f, err := js.PublishAsync(subject, []byte(fmt.Sprintf("js-%d", i)))
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		futures = append(futures, f)
	}
	acked, refused := 0, 0
	for i, f := range futures {
		select {
		case <-f.Ok():
			acked++
		case err := <-f.Err():
			if !errors.Is(err, nats.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("publish %d: %v; want an ack or a refusal (no responders), never a timeout", i, err)
			}
			refused++
		case <-time.After(10 * time.Second):
			t.Fatalf("publish %d: neither acknowledged nor refused after 10s", i)
		}
	}
	took := time.Since(start)
	info, err := admin.StreamInfo(stream)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("JetStream at the rate limit: sent %d, acknowledged %d, refused %d, all answered in %s; the stream holds %d",
		sent, acked, refused, took.Round(time.Millisecond), info.State.Msgs)
	if refused == 0 || acked == 0 {
		t.Fatalf("acknowledged %d, refused %d: want the burst stored and the excess refused", acked, refused)
	}
	if int(info.State.Msgs) != acked {
		t.Fatalf("the stream holds %d messages; %d were acknowledged", info.State.Msgs, acked)
	}
	eventually(t, 5*time.Second, "a Permissions Violation per refusal", func() bool {
		return sink.count("Permissions Violation", "rate limit of tenant rate-reject") == refused
	})
}
