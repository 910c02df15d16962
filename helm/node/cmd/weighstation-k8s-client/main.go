// Command weighstation-k8s-client is the node test's client pod: nats.go or franz-go publishing
// at a fixed rate through the gateway's Service for a set time, as the users' own clients do
// (JetStream publishes with a Nats-Msg-Id retried until acknowledged; an idempotent Kafka
// producer; or plain NATS publishes above a limit, whose refusals it counts). At the end it
// prints one JSON report: what it sent, what was acknowledged or refused, its longest gap
// without an acknowledgement, and the addresses the servers told it (which must be the
// gateway's only).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weighstation/weighstation/helm/node/clientreport"
)

// tally is a report under construction, shared by the publishing goroutines.
type tally struct {
	mu      sync.Mutex
	r       clientreport.Report
	lastAck time.Time
	learnt  map[string]bool
}

func (t *tally) ack(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.r.Acked++
	if t.lastAck.IsZero() {
		t.r.FirstAck = at.UTC().Format(time.RFC3339Nano)
	} else if gap := at.Sub(t.lastAck).Milliseconds(); gap > t.r.LongestGapMs {
		t.r.LongestGapMs = gap
	}
	if at.After(t.lastAck) {
		t.lastAck = at
		t.r.LastAck = at.UTC().Format(time.RFC3339Nano)
	}
}

func (t *tally) add(f func(r *clientreport.Report)) {
	t.mu.Lock()
	f(&t.r)
	t.mu.Unlock()
}

func (t *tally) learn(addrs ...string) {
	t.mu.Lock()
	for _, a := range addrs {
		t.learnt[a] = true
	}
	t.mu.Unlock()
}

func (t *tally) report() clientreport.Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.r
	r.Learnt = nil
	for a := range t.learnt {
		r.Learnt = append(r.Learnt, a)
	}
	sort.Strings(r.Learnt)
	return r
}

// options are every mode's flags.
type options struct {
	name, mode, url, user, password, subject, bootstrap, topic, clientID, targets string
	rate                                                                          float64
	duration, giveUp                                                              time.Duration
	connections, size, batchBytes                                                 int
}

func main() {
	var o options
	fs := flag.NewFlagSet("weighstation-k8s-client", flag.ExitOnError)
	fs.StringVar(&o.name, "name", "", "the client's name: the prefix of its message ids")
	fs.StringVar(&o.mode, "mode", "", "nats-js (JetStream, Nats-Msg-Id, retried until acknowledged), nats-pub (core publishes, refusals counted), nats-churn (a new connection per message, no retry: a failed first try counts) or kafka (idempotent producer)")
	fs.StringVar(&o.url, "url", "", "NATS: the gateway's URL (nats://host:port)")
	fs.StringVar(&o.user, "user", "", "NATS user or Kafka SASL PLAIN user (selects the tenant)")
	fs.StringVar(&o.password, "password", "", "its password")
	fs.StringVar(&o.subject, "subject", "", "NATS subject")
	fs.StringVar(&o.bootstrap, "bootstrap", "", "Kafka: the gateway's bootstrap host:port")
	fs.StringVar(&o.topic, "topic", "", "Kafka topic")
	fs.StringVar(&o.clientID, "client-id", "", "Kafka client.id (default: the name)")
	fs.Float64Var(&o.rate, "rate", 50, "messages per second, across the connections")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "how long to publish")
	fs.DurationVar(&o.giveUp, "give-up", 60*time.Second, "a message not acknowledged after this long is given up (counted)")
	fs.IntVar(&o.connections, "connections", 1, "nats-pub: connections (the Service spreads them over the gateway pods)")
	fs.IntVar(&o.size, "size", 64, "payload bytes")
	fs.IntVar(&o.batchBytes, "batch-bytes", 0, "kafka: the producer's largest batch (0: franz-go's default, 1 MB); a limited tenant's client keeps its batches within the tenant's burst")
	fs.StringVar(&o.targets, "targets", "", "dial: comma-separated host:port to open a TCP connection to, each once")
	_ = fs.Parse(os.Args[1:])
	if o.name == "" {
		fail("--name is required")
	}
	t := &tally{r: clientreport.Report{Client: o.name, Mode: o.mode}, learnt: map[string]bool{}}
	var err error
	switch o.mode {
	case "nats-js":
		err = natsJetStream(o, t)
	case "nats-pub":
		err = natsPublish(o, t)
	case "nats-churn":
		natsChurn(o, t)
	case "dial":
		dial(o, t)
	case "kafka":
		err = kafkaProduce(o, t)
	default:
		fail("--mode must be nats-js, nats-pub, nats-churn, kafka or dial")
	}
	if err != nil {
		fail(err.Error())
	}
	out, _ := json.Marshal(t.report())
	fmt.Println(string(out))
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "weighstation-k8s-client:", msg)
	os.Exit(1)
}

// every calls f at a fixed rate for d, each call at its intended time (an open loop: a slow
// call does not delay the next one's start).
func every(rate float64, d time.Duration, f func(seq int)) {
	interval := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	begin := time.Now()
	for seq := 1; ; seq++ {
		at := begin.Add(time.Duration(seq-1) * interval)
		if at.Sub(begin) >= d {
			break
		}
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() { defer wg.Done(); f(seq) }()
	}
	wg.Wait()
}

// dial opens one TCP connection to each target (a broker pod's own address, say) and records
// whether it was let through: what a NetworkPolicy decides.
func dial(o options, t *tally) {
	for _, target := range strings.Split(o.targets, ",") {
		outcome := "connected"
		c, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			outcome = err.Error()
		} else {
			c.Close()
		}
		t.add(func(r *clientreport.Report) {
			if r.Dials == nil {
				r.Dials = map[string]string{}
			}
			r.Dials[target] = outcome
		})
	}
}
