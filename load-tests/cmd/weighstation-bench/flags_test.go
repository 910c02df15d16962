package main

import (
	"testing"
	"time"
)

// The newcomer's command line from the issue parses into an alternating comparison with the
// baseline first; the direct Kafka target ignores the address the broker advertises.
func TestCompareCommandLine(t *testing.T) {
	t.Setenv("NATS_UPSTREAM_PORT", "24222")
	o, out, _, err := parseFlags([]string{"--compare", "direct,gateway", "--scenario", "nats-request", "--rate", "2000", "--duration", "30s", "--subscriber", "direct"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Endpoints) != 2 || o.Endpoints[0].Name != "direct" || o.Endpoints[1].Name != "gateway" {
		t.Fatalf("endpoints %+v", o.Endpoints)
	}
	if !o.Endpoints[0].PinKafka || o.Endpoints[1].PinKafka {
		t.Error("only the direct Kafka target must be pinned")
	}
	if o.Endpoints[0].NATS != "127.0.0.1:24222" || o.Config.SubscribeVia != "127.0.0.1:24222" {
		t.Errorf("direct NATS %q, subscriber %q: NATS_UPSTREAM_PORT not honoured", o.Endpoints[0].NATS, o.Config.SubscribeVia)
	}
	if o.Plan.Rate != 2000 || o.Plan.Duration != 30*time.Second || o.Scenario != "nats-request" || out == "" {
		t.Errorf("plan %+v, scenario %q, out %q", o.Plan, o.Scenario, out)
	}
}

// Envoy without the filter is a third NATS target, found the way make run was told.
func TestTCPProxyTarget(t *testing.T) {
	t.Setenv("NATS_PLAIN_PORT", "24333")
	o, _, _, err := parseFlags([]string{"--compare", "direct,tcp-proxy,gateway"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Endpoints) != 3 || o.Endpoints[1].NATS != "127.0.0.1:24333" {
		t.Fatalf("endpoints %+v", o.Endpoints)
	}
	if _, _, _, err := parseFlags([]string{"--target", "tcp-proxy", "--scenario", "kafka-acks1"}); err == nil {
		t.Error("tcp-proxy accepted for Kafka")
	}
}

func TestRejectsUnknownTargetsAndSubscribers(t *testing.T) {
	t.Setenv("NATS_PLAIN_PORT", "")
	for _, args := range [][]string{{"--target", "staging"}, {"--compare", "direct,prod"}, {"--subscriber", "elsewhere"}, {"stray"}, {"--target", "tcp-proxy"}} {
		if _, _, _, err := parseFlags(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
