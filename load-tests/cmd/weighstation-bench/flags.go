package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/bench"
	"github.com/weighstation/weighstation/load-tests/internal/engine"
	"github.com/weighstation/weighstation/load-tests/internal/scenario"
	"github.com/weighstation/weighstation/load-tests/internal/schedule"
)

// parseFlags turns the command line into what to measure and where to write it; nil options
// (and no error) mean there is nothing to run.
func parseFlags(args []string) (o *bench.Options, out string, quiet bool, err error) {
	fs := flag.NewFlagSet("weighstation-bench", flag.ContinueOnError)
	var (
		scen     = fs.String("scenario", "nats-pubsub", "what to measure (see --list)")
		list     = fs.Bool("list", false, "list the scenarios and exit")
		target   = fs.String("target", "gateway", "where to send: gateway, direct or tcp-proxy (Envoy without the filter; NATS only)")
		compare  = fs.String("compare", "", "alternate the load between targets in one run, e.g. direct,gateway or direct,tcp-proxy,gateway (ratios are to each earlier one)")
		rate     = fs.Float64("rate", 1000, "operations per second, across all connections")
		arrivals = fs.String("arrivals", string(schedule.Fixed), "fixed (1/rate apart) or poisson")
		seed     = fs.Uint64("seed", 1, "seed of the poisson schedule")
		duration = fs.Duration("duration", 30*time.Second, "measured time, after the warm-up")
		warmup   = fs.Duration("warmup", 5*time.Second, "time sent but not measured, first")
		phase    = fs.Duration("phase", 5*time.Second, "with --compare: how long each target holds the load in turn")
		conns    = fs.Int("connections", 4, "client connections per target (the operations are spread over them)")
		size     = fs.Int("size", 128, "message payload bytes")
		timeout  = fs.Duration("timeout", 10*time.Second, "for one request, JetStream publish or Kafka produce")
		drain    = fs.Duration("drain", 10*time.Second, "how long to wait for outstanding operations after the last send")
		inflight = fs.Int("max-inflight", 100_000, "operations outstanding at most; more are dropped and the run declared invalid")
		natsUser = fs.String("nats-user", "", "NATS user (selects the tenant); empty connects without credentials")
		natsPass = fs.String("nats-password", "", "NATS password")
		directU  = fs.String("direct-nats-user", "baseline", "NATS user on nats-server itself (direct and tcp-proxy targets, --subscriber direct): one that belongs to no tenant (make run's baseline user)")
		directP  = fs.String("direct-nats-password", "baseline-secret", "its password")
		directKU = fs.String("direct-kafka-user", "baseline", "SASL PLAIN user on the Kafka broker itself (direct target): one that belongs to no tenant (make run's baseline user); empty: none")
		directKP = fs.String("direct-kafka-password", "baseline-secret", "its password")
		clientID = fs.String("kafka-client-id", "weighstation-bench", "Kafka client.id (its prefix selects the tenant, e.g. acme-bench)")
		topic    = fs.String("kafka-topic", "weighstation-bench", "Kafka topic (created with one partition if missing)")
		retries  = fs.Int("kafka-retries", 0, "sarama Producer.Retry.Max (0: a refusal is counted, not retried)")
		subVia   = fs.String("subscriber", "same", "nats-pubsub: where the subscriber connects: same (as the publishers) or direct (nats-server itself: counts what the gateway let through)")
		outDir   = fs.String("out", "", "report directory (default load-tests/out/<scenario>-<time>)")
		quietF   = fs.Bool("quiet", false, "no progress line")
	)
	gwNATS := fs.String("gateway-nats", "127.0.0.1:"+envPort("NATS_PORT", "4222"), "the gateway's NATS listener")
	directNATS := fs.String("direct-nats", "127.0.0.1:"+envPort("NATS_UPSTREAM_PORT", "14222"), "nats-server itself")
	gwKafka := fs.String("gateway-kafka", "127.0.0.1:"+envPort("KAFKA_PORT", "9092"), "the gateway's Kafka listener")
	directKafka := fs.String("direct-kafka", "127.0.0.1:"+envPort("KAFKA_DIRECT_PORT", "19094"), "the Kafka broker itself (its listener that advertises itself; every connection is pinned to it in any case)")
	plainNATS := fs.String("tcp-proxy-nats", envAddr("NATS_PLAIN_PORT"), "Envoy's NATS listener without the filter (make run with NATS_PLAIN_PORT set)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: weighstation-bench [flags]\n\n  weighstation-bench --compare direct,gateway --scenario nats-request --rate 2000 --duration 30s\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, "", false, err
	}
	if *list {
		fmt.Println(strings.Join(scenario.Names(), "\n"))
		return nil, "", false, nil
	}
	if fs.NArg() > 0 {
		return nil, "", false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	known := map[string]scenario.Endpoint{
		"gateway":   {Name: "gateway", NATS: *gwNATS, Kafka: *gwKafka},
		"direct":    {Name: "direct", NATS: *directNATS, Kafka: *directKafka, PinKafka: true, AsBaseline: true},
		"tcp-proxy": {Name: "tcp-proxy", NATS: *plainNATS, AsBaseline: true},
	}
	names := []string{*target}
	if *compare != "" {
		names = strings.Split(*compare, ",")
	}
	var endpoints []scenario.Endpoint
	for _, n := range names {
		ep, ok := known[strings.TrimSpace(n)]
		switch {
		case !ok:
			return nil, "", false, fmt.Errorf("unknown target %q (want gateway, direct or tcp-proxy)", n)
		case ep.Name == "tcp-proxy" && scenario.IsKafka(*scen):
			return nil, "", false, fmt.Errorf("tcp-proxy is a NATS target; Kafka has direct and gateway")
		case ep.Name == "tcp-proxy" && ep.NATS == "":
			return nil, "", false, fmt.Errorf("tcp-proxy needs --tcp-proxy-nats (or NATS_PLAIN_PORT, as make run was started with)")
		}
		endpoints = append(endpoints, ep)
	}
	subscribeVia := ""
	switch *subVia {
	case "same":
	case "direct":
		subscribeVia = *directNATS
	default:
		return nil, "", false, fmt.Errorf("--subscriber %q: want same or direct", *subVia)
	}
	runID := make([]byte, 4)
	_, _ = rand.Read(runID)
	o = &bench.Options{
		Scenario: *scen,
		Plan: engine.Plan{
			Rate: *rate, Arrivals: schedule.Arrivals(*arrivals), Seed: *seed,
			Warmup: *warmup, Duration: *duration, Phase: *phase,
			Connections: *conns, MaxInFlight: *inflight, Drain: *drain,
		},
		Config: scenario.Config{
			Connections: *conns, Size: *size, Timeout: *timeout, RunID: hex.EncodeToString(runID),
			NATSUser: *natsUser, NATSPassword: *natsPass, SubscribeVia: subscribeVia,
			DirectNATSUser: *directU, DirectNATSPassword: *directP, DirectKafkaUser: *directKU, DirectKafkaPassword: *directKP,
			KafkaClientID: *clientID, KafkaTopic: *topic, KafkaRetries: *retries,
		},
		Endpoints: endpoints,
	}
	out = *outDir
	if out == "" {
		out = fmt.Sprintf("load-tests/out/%s-%s", *scen, time.Now().Format("20060102-150405"))
	}
	return o, out, *quietF, nil
}

// envAddr is 127.0.0.1:$name, or empty when the variable is not set.
func envAddr(name string) string {
	if v := os.Getenv(name); v != "" {
		return "127.0.0.1:" + v
	}
	return ""
}

// envPort is the port the local stack uses for a role: the same environment variables override
// both, so a stack started with other ports is found by exporting the same variables.
func envPort(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
