package discovery

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func registry() (*Registry, *int) {
	r := New([]Range{{Chain: "weighstation-kafka-sasl", First: 1, Last: 4}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	changes := new(int)
	r.OnChange(func() { *changes++ })
	return r, changes
}

func TestBrokersAreFrontedOnlyInRangeAndAtAnAddressEnvoyCanDial(t *testing.T) {
	r, changes := registry()
	now := time.Now()
	r.Observe([]Seen{
		{Chain: "weighstation-kafka-sasl", Node: 1, Host: "kafka-1.kafka.svc", Port: 9093, SeenMs: 10},
		{Chain: "weighstation-kafka-sasl", Node: 2, Host: "10.0.0.2", Port: 9093, SeenMs: 10},
		{Chain: "weighstation-kafka-sasl", Node: 5, Host: "kafka-5", Port: 9093, SeenMs: 10},
		{Chain: "weighstation-kafka-sasl", Node: -1, Host: "kafka-x", Port: 9093, SeenMs: 10},
		{Chain: "weighstation-kafka-sasl", Node: 3, Host: strings.Repeat("a", 300), Port: 9093, SeenMs: 10},
		{Chain: "weighstation-kafka-sasl", Node: 4, Host: "kafka 4", Port: 9093, SeenMs: 10},
		{Chain: "weighstation-kafka-other", Node: 1, Host: "kafka-1", Port: 9093, SeenMs: 10},
	}, now)
	if *changes != 1 {
		t.Errorf("%d change calls for one report, want 1", *changes)
	}
	want := map[int32]string{1: "kafka-1.kafka.svc:9093", 2: "10.0.0.2:9093"}
	got := r.Fronted()["weighstation-kafka-sasl"]
	if len(got) != len(want) || got[1] != want[1] || got[2] != want[2] || len(r.Fronted()) != 1 {
		t.Errorf("fronted %v, want %v only", r.Fronted(), want)
	}
	states := map[int32]string{}
	for _, b := range r.Brokers() {
		states[b.Node] = b.State
		if b.State != Fronted && b.Reason == "" {
			t.Errorf("node %d %s without a reason", b.Node, b.State)
		}
	}
	for node, state := range map[int32]string{5: OutOfRange, -1: OutOfRange, 3: InvalidAddress, 4: InvalidAddress} {
		if states[node] != state {
			t.Errorf("node %d: %q, want %q", node, states[node], state)
		}
	}
}

func TestABrokerMovesOnlyOnANewerSighting(t *testing.T) {
	r, changes := registry()
	now := time.Now()
	r.Observe([]Seen{{Chain: "weighstation-kafka-sasl", Node: 1, Host: "old", Port: 9093, SeenMs: 10}}, now)
	r.Observe([]Seen{{Chain: "weighstation-kafka-sasl", Node: 1, Host: "new", Port: 9093, SeenMs: 20}}, now)
	r.Observe([]Seen{{Chain: "weighstation-kafka-sasl", Node: 1, Host: "old", Port: 9093, SeenMs: 15}}, now)
	r.Observe([]Seen{{Chain: "weighstation-kafka-sasl", Node: 1, Host: "new", Port: 9093, SeenMs: 30}}, now)
	if got := r.Fronted()["weighstation-kafka-sasl"][1]; got != "new:9093" {
		t.Errorf("node 1 at %s, want new:9093", got)
	}
	if *changes != 2 {
		t.Errorf("%d changes, want 2 (discovered, moved): a sighting that changes nothing is none", *changes)
	}
}

func TestWithheldBrokersAreBounded(t *testing.T) {
	r, _ := registry()
	var seen []Seen
	for i := range maxWithheld + 10 {
		seen = append(seen, Seen{Chain: "weighstation-kafka-sasl", Node: int32(100 + i), Host: "k", Port: 1, SeenMs: 1})
	}
	r.Observe(seen, time.Now())
	if n := len(r.Brokers()); n != maxWithheld {
		t.Errorf("%d brokers kept, want %d", n, maxWithheld)
	}
	if r.Dropped() != 10 {
		t.Errorf("dropped %d, want 10", r.Dropped())
	}
	r.Observe([]Seen{{Chain: "weighstation-kafka-sasl", Node: 1, Host: "kafka-1", Port: 9093, SeenMs: 1}}, time.Now())
	if r.Fronted()["weighstation-kafka-sasl"][1] == "" {
		t.Error("a broker in range is fronted however many are withheld")
	}
}
