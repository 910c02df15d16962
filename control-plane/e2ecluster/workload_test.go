package e2ecluster

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamName is the R3 stream every JetStream publisher writes to.
const streamName = "CLUSTER"

// Offered rates of the fixed-rate load.
const (
	limitedOffered = 300 // cluster-limited publishes at 1.5 times its limit
	requestRate    = 20
	jsPublishRate  = 25
	// jsGiveUp: a JetStream publish not acknowledged after this long, retried all the while,
	// fails the test.
	jsGiveUp = 30 * time.Second
)

// workload is the fixed-rate load of one event: core publish at 1.5× a limit (read by the
// baseline verifier and by natscli through the gateway), request/reply, JetStream publishes with Nats-Msg-Id retried until
// acknowledged, and a pull consumer, each over its own nats.go connection through the gateway.
type workload struct {
	name    string
	start   time.Time
	clients []*client
	// cli is natscli's nats sub of what cluster-limited is admitted, through the gateway.
	cli *natsCLI
	// load is the publishers and requests; reading, the pull consumer, which goes on until it
	// has read what was stored.
	load, reading running

	mu       sync.Mutex
	arrivals []time.Time // cluster-limited's messages as the baseline verifier received them
	requests []request
	acked    map[string]bool
	gaveUp   []string
	reads    []read
	jsErrors int
}

// running is a set of goroutines and what stops them.
type running struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

func (r *running) end() {
	close(r.stop)
	r.wg.Wait()
}

type request struct {
	at time.Time
	ok bool
}

type read struct {
	at        time.Time
	seq       uint64
	delivered uint64
}

func (w *workload) subject(kind string) string { return "cluster." + kind + "." + w.name }

// startWorkload creates the event's consumer and starts every client.
func startWorkload(t *testing.T, name string) *workload {
	t.Helper()
	w := &workload{name: name, start: time.Now(), acked: map[string]bool{}}
	w.load.stop, w.reading.stop = make(chan struct{}), make(chan struct{})
	direct := baseline(t)
	if _, err := direct.Subscribe(w.subject("limited"), func(*nats.Msg) {
		w.mu.Lock()
		w.arrivals = append(w.arrivals, time.Now())
		w.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := direct.Flush(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(direct)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: streamName, Subjects: []string{"cluster.js.>"}, Replicas: natsServers, Duplicates: 5 * time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, streamName, jetstream.ConsumerConfig{
		Durable: "reader-" + name, FilterSubject: w.subject("js"), AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 5 * time.Second, Replicas: natsServers,
	}); err != nil {
		t.Fatal(err)
	}

	limited := w.connect(t, "limited-pub", tenantLimited)
	responder := w.connect(t, "responder", tenantApp)
	requester := w.connect(t, "requester", tenantApp)
	publisher := w.connect(t, "js-pub", tenantApp)
	reader := w.connect(t, "js-reader", tenantApp)
	if _, err := responder.nc.QueueSubscribe(w.subject("svc"), "svc", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		t.Fatal(err)
	}
	if err := responder.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	w.cli = startNatsCLISub(t, tenantApp, w.subject("limited"))
	w.every(limitedOffered, func() { _ = limited.nc.Publish(w.subject("limited"), []byte("x")) })
	w.every(requestRate, func() {
		_, err := requester.nc.Request(w.subject("svc"), []byte("ping"), time.Second)
		w.mu.Lock()
		w.requests = append(w.requests, request{at: time.Now(), ok: err == nil})
		w.mu.Unlock()
	})
	w.goPublishJetStream(publisher)
	w.goRead(reader)
	return w
}

func (w *workload) connect(t *testing.T, role, user string) *client {
	c := connectClient(t, w.name+"-"+role, user)
	w.clients = append(w.clients, c)
	return c
}

// every calls f at a fixed rate until the load stops, each call on its schedule however long
// the last took (open loop for the publishes, which never block).
func (w *workload) every(rate int, f func()) {
	w.load.wg.Add(1)
	go func() {
		defer w.load.wg.Done()
		interval := time.Second / time.Duration(rate)
		next := time.Now()
		for {
			next = next.Add(interval)
			select {
			case <-w.load.stop:
				return
			case <-time.After(time.Until(next)):
			}
			f()
		}
	}()
}

// goPublishJetStream publishes numbered messages, each retried with its Nats-Msg-Id until
// acknowledged, as a publisher that must lose and duplicate nothing does.
func (w *workload) goPublishJetStream(c *client) {
	js, _ := jetstream.New(c.nc)
	w.load.wg.Add(1)
	go func() {
		defer w.load.wg.Done()
		for seq := 1; ; seq++ {
			select {
			case <-w.load.stop:
				return
			case <-time.After(time.Second / jsPublishRate):
			}
			w.publishUntilAcknowledged(js, w.name+"-"+strconv.Itoa(seq))
		}
	}()
}

func (w *workload) publishUntilAcknowledged(js jetstream.JetStream, id string) {
	giveUp := time.Now().Add(jsGiveUp)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.Publish(ctx, w.subject("js"), []byte(id), jetstream.WithMsgID(id))
		cancel()
		w.mu.Lock()
		switch {
		case err == nil:
			w.acked[id] = true
		case time.Now().After(giveUp):
			w.gaveUp = append(w.gaveUp, id)
		default:
			w.jsErrors++
		}
		w.mu.Unlock()
		if err == nil || time.Now().After(giveUp) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// goRead pulls the event's messages in batches and acknowledges each.
func (w *workload) goRead(c *client) {
	js, _ := jetstream.New(c.nc)
	w.reading.wg.Add(1)
	go func() {
		defer w.reading.wg.Done()
		var cons jetstream.Consumer
		for {
			select {
			case <-w.reading.stop:
				return
			default:
			}
			if cons == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				cons, _ = js.Consumer(ctx, streamName, "reader-"+w.name)
				cancel()
				if cons == nil {
					time.Sleep(200 * time.Millisecond)
					continue
				}
			}
			batch, err := cons.Fetch(50, jetstream.FetchMaxWait(time.Second))
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for m := range batch.Messages() {
				md, err := m.Metadata()
				if err != nil {
					continue
				}
				w.mu.Lock()
				w.reads = append(w.reads, read{at: time.Now(), seq: md.Sequence.Stream, delivered: md.NumDelivered})
				w.mu.Unlock()
				_ = m.Ack()
			}
		}
	}()
}

// finish stops the load, lets the reader catch up with what was stored, and closes every
// connection; it returns what the stream holds of the event (sequence → Nats-Msg-Id).
func (w *workload) finish(t *testing.T) map[uint64]string {
	t.Helper()
	w.load.end()
	stored := w.storedIDs(t)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && !w.readAll(stored) {
		time.Sleep(200 * time.Millisecond)
	}
	w.reading.end()
	for _, c := range w.clients {
		if c.closed.Load() {
			t.Errorf("%s closed for good", c.name)
		}
		// Refusals happen only above a limit: cluster-app's clients stay far under theirs.
		if n := c.refusals.Load(); n > 0 && !strings.HasSuffix(c.name, "limited-pub") {
			t.Errorf("%s, under its tenant's limits, was refused %d times", c.name, n)
		}
		c.closing.Store(true)
		c.nc.Close()
	}
	return stored
}

// readAll says whether every stored sequence has been read.
func (w *workload) readAll(stored map[uint64]string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[uint64]bool{}
	for _, r := range w.reads {
		seen[r.seq] = true
	}
	for seq := range stored {
		if !seen[seq] {
			return false
		}
	}
	return true
}

// storedIDs reads the event's messages from the stream directly: sequence → Nats-Msg-Id.
func (w *workload) storedIDs(t *testing.T) map[uint64]string {
	t.Helper()
	js, err := jetstream.New(baseline(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, streamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{w.subject("js")}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// An ordered consumer recreates itself after a hiccup and may deliver some messages
	// again: read until every message it counted has been seen.
	stored := map[uint64]string{}
	for want := int(info.NumPending); len(stored) < want; {
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d messages the stream holds", len(stored), want)
		}
		batch, err := cons.Fetch(want-len(stored), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			continue
		}
		for m := range batch.Messages() {
			md, _ := m.Metadata()
			stored[md.Sequence.Stream] = m.Headers().Get(jetstream.MsgIDHeader)
		}
	}
	return stored
}

// checkJetStream: each acknowledged message stored exactly once, none lost; the pull consumer
// read every stored message at least once, first reads in order, re-reads only after the fault.
func (w *workload) checkJetStream(t *testing.T, stored map[uint64]string, faultAt time.Time) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.gaveUp) > 0 {
		t.Errorf("%d JetStream publishes never acknowledged in %s of retries, e.g. %s", len(w.gaveUp), jsGiveUp, w.gaveUp[0])
	}
	copies := map[string]int{}
	for _, id := range stored {
		copies[id]++
	}
	var lost, duplicated int
	for id := range w.acked {
		if copies[id] == 0 {
			lost++
		}
	}
	for _, n := range copies {
		if n > 1 {
			duplicated++
		}
	}
	if lost > 0 || duplicated > 0 {
		t.Errorf("JetStream: %d acknowledged messages lost, %d stored more than once", lost, duplicated)
	}
	var last uint64
	var rereads, early int
	firstRead := map[uint64]bool{}
	for _, r := range w.reads {
		if firstRead[r.seq] {
			rereads++
			if r.at.Before(faultAt) {
				early++
			}
			continue
		}
		firstRead[r.seq] = true
		switch {
		case r.seq > last:
			last = r.seq
		case r.delivered > 1 && !r.at.Before(faultAt):
			// Delivered before, in a fetch the fault cut off: JetStream sends it again once
			// its ack wait is over, behind later messages.
			rereads++
		default:
			t.Errorf("pull consumer: sequence %d read first after %d", r.seq, last)
		}
	}
	unread := 0
	for seq := range stored {
		if !firstRead[seq] {
			unread++
		}
	}
	if unread > 0 {
		t.Errorf("pull consumer: %d of %d stored messages never read", unread, len(stored))
	}
	if early > 0 {
		t.Errorf("pull consumer: %d re-reads before any fault", early)
	}
	t.Logf("JetStream: %d acknowledged (%d attempts failed and were retried with the same Nats-Msg-Id), %d stored, %d lost, %d duplicated; pull consumer read %d, %d re-read after the fault",
		len(w.acked), w.jsErrors, len(stored), lost, duplicated, len(firstRead), rereads)
}

// checkRequests: every request answered outside the fault, and the last second's answered.
func (w *workload) checkRequests(t *testing.T, faults []window) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var failed, outside int
	for _, r := range w.requests {
		if !r.ok {
			failed++
			if !within(faults, r.at) {
				outside++
			}
		}
	}
	if outside > 0 {
		t.Errorf("request/reply: %d requests failed outside the fault", outside)
	}
	if n := len(w.requests); n < requestRate || !allOK(w.requests[n-requestRate:]) {
		t.Errorf("request/reply: the last second's requests did not all succeed")
	}
	t.Logf("request/reply: %d requests, %d failed during the fault", len(w.requests), failed)
}

func allOK(rs []request) bool {
	for _, r := range rs {
		if !r.ok {
			return false
		}
	}
	return true
}

// window is a span of time: a fault, from the event's start until every client was back.
type window struct{ from, to time.Time }

func within(ws []window, at time.Time) bool {
	for _, w := range ws {
		if !at.Before(w.from) && !at.After(w.to) {
			return true
		}
	}
	return false
}

// checkRate: cluster-limited's admitted messages, as the baseline verifier received them, in
// every sliding 10 s window from 2 s on: at most the limit + 5%, and at least the limit − 5%
// where no fault touches the window (its publisher offers 1.5 times the limit throughout).
func (w *workload) checkRate(t *testing.T, faults []window, end time.Time) {
	t.Helper()
	w.mu.Lock()
	arrivals := append([]time.Time(nil), w.arrivals...)
	w.mu.Unlock()
	const span = 10 * time.Second
	most, least := limitedRate*10*105/100, limitedRate*10*95/100
	var windows, clean int
	lo, hi := -1, 0
	for from := w.start.Add(2 * time.Second); !from.Add(span).After(end); from = from.Add(time.Second) {
		n := 0
		for _, a := range arrivals {
			if !a.Before(from) && a.Before(from.Add(span)) {
				n++
			}
		}
		windows++
		hi = max(hi, n)
		if n > most {
			t.Errorf("window from %s: %d admitted, over %d", from.Sub(w.start), n, most)
		}
		faulty := false
		for _, f := range faults {
			faulty = faulty || (f.from.Before(from.Add(span)) && f.to.After(from))
		}
		if faulty {
			continue
		}
		clean++
		if lo < 0 || n < lo {
			lo = n
		}
		if n < least {
			t.Errorf("window from %s (no fault): %d admitted, under %d", from.Sub(w.start), n, least)
		}
	}
	if windows == 0 || clean == 0 {
		t.Fatalf("%d windows, %d without a fault: the run was too short", windows, clean)
	}
	t.Logf("rate of a %d/s limit offered %d/s: %d sliding 10 s windows, the fullest %d admitted; %d without a fault, the emptiest %d",
		limitedRate, limitedOffered, windows, hi, clean, lo)
}
