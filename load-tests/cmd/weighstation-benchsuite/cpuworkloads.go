package main

import (
	"context"
	"fmt"
)

// direction is the path through Envoy a CPU workload measures.
type direction string

const (
	natsPublish  direction = "nats pub" // a client publishing through Envoy
	natsDelivery direction = "nats sub" // a subscriber receiving through Envoy
	// natsPublishManyTenants is natsPublish with the benchmark's tenants and with 10,000 more.
	natsPublishManyTenants direction = "nats pub, tenants"
	// kafkaProduce is Produce requests over one pinned connection (kafkaproduce.go).
	kafkaProduce direction = "kafka produce"
	// kafkaProducerPerf is Kafka's own Java producer, which follows the broker's metadata.
	kafkaProducerPerf direction = "kafka producer-perf"
	// kafkaFetch is a consumer's Fetch requests over one pinned connection (kafkafetch.go), each
	// answered with Bytes of records.
	kafkaFetch direction = "kafka fetch"
)

// workloadShape is what one message of a workload is: for Kafka Produce one request carrying a
// batch of Records records of Bytes bytes each, otherwise one message (Records 1) of Bytes.
type workloadShape struct {
	Direction direction `json:"direction"`
	Bytes     int       `json:"recordBytes"`
	Records   int       `json:"recordsPerMessage"`
}

func (w workloadShape) name() string {
	switch w.Direction {
	case kafkaProduce:
		return fmt.Sprintf("kafka produce %d × %s", w.Records, sizeName(w.Bytes))
	case kafkaProducerPerf:
		return fmt.Sprintf("kafka produce %s acks=1", sizeName(w.Bytes))
	}
	return fmt.Sprintf("%s %s", w.Direction, sizeName(w.Bytes))
}

func sizeName(size int) string {
	if size%1024 == 0 {
		return fmt.Sprintf("%d KiB", size/1024)
	}
	return fmt.Sprintf("%d B", size)
}

// cpuWorkload is what is sent, and how to send it to a target.
type cpuWorkload struct {
	workloadShape
	messages int
	targets  []string
	// prepare, if set, readies the gateway for a target before its run, outside the
	// measurement (a reload's work is not a message's).
	prepare func(ctx context.Context, target string) error
	send    func(ctx context.Context, target string, messages int) (rate float64, err error)
}

// publishSubject is where the publish workload publishes (no one subscribes).
const publishSubject = "weighstation.cpu"

// The message counts keep each run to a few seconds (Envoy's CPU is read to the nanosecond, see
// processCPU); the broker answers only a few thousand Produce requests a second here (each
// crosses its TLS listener to it).
var (
	natsSizes = []struct{ bytes, messages int }{
		{128, 2_000_000}, {1 << 10, 1_000_000}, {16 << 10, 200_000}, {64 << 10, 60_000},
	}
	// produceShapes: records per request at 100 B (what each more record costs), and record
	// sizes at one record per request (what each more KiB costs); every batch within 1 MiB.
	produceShapes = []struct{ records, bytes, requests int }{
		{1, 100, 10_000}, {100, 100, 4_000}, {1000, 100, 800},
		{1, 1 << 10, 8_000}, {1, 16 << 10, 4_000}, {1, 64 << 10, 1_200},
	}
	// fetchSizes: what each Fetch asks for (and gets), one at a time.
	fetchSizes = []struct{ bytes, requests int }{{16 << 10, 10_000}, {256 << 10, 3_000}, {1 << 20, 1_000}}
)

func (s *suite) cpuWorkloads() []cpuWorkload {
	scale := 1 // quick: a tenth of the messages
	if s.timing == quickTiming {
		scale = 10
	}
	natsAddr := map[string]string{"gateway": s.stack.Addr("NATS_PORT"), "tcp-proxy": s.stack.Addr("NATS_PLAIN_PORT"),
		"direct": s.stack.Addr("NATS_UPSTREAM_PORT"), "gateway-tls": s.stack.Addr("NATS_TLS_PORT"),
		wasmNoop: s.stack.Addr("NATS_NOOP_WASM_PORT"), nativeNoop: s.stack.Addr("NATS_NOOP_NATIVE_PORT")}
	// nats-server admits a tenant's user only through the gateway: elsewhere the baseline user.
	natsUser := func(target string) tenant {
		switch target {
		case "direct", "tcp-proxy", wasmNoop, nativeNoop:
			return baseline
		case "gateway-open":
			return reader
		}
		return acme
	}
	// gateway-open: the smallest messages through the gateway as reader, with acme's limits but
	// no permission lists, beside acme's (a publish list, a produce list) in the same run: what
	// deciding permissions costs.
	natsAddr["gateway-open"] = natsAddr["gateway"]
	var out []cpuWorkload
	for i, n := range natsSizes {
		targets := append([]string{"gateway", "tcp-proxy", "direct", "gateway-tls"}, floorTargets...)
		if i == 0 {
			targets = append(targets, "gateway-open")
		}
		out = append(out, cpuWorkload{
			workloadShape: workloadShape{Direction: natsPublish, Bytes: n.bytes, Records: 1},
			messages:      n.messages / scale,
			targets:       targets,
			send: func(ctx context.Context, target string, messages int) (float64, error) {
				return s.natsBench(ctx, natsAddr[target], publishSubject, natsUser(target), n.bytes, messages, target == "gateway-tls")
			},
		})
	}
	// The smallest messages again, as acme, with the benchmark's few tenants and with 10,000
	// more (manytenants.go): a tenant count should not change what a message costs.
	out = append(out, cpuWorkload{
		workloadShape: workloadShape{Direction: natsPublishManyTenants, Bytes: natsSizes[0].bytes, Records: 1},
		messages:      natsSizes[0].messages / scale,
		targets:       []string{"gateway", "gateway-10k-tenants"},
		prepare: func(ctx context.Context, target string) error {
			return s.withTenants(ctx, target == "gateway-10k-tenants")
		},
		send: func(ctx context.Context, target string, messages int) (float64, error) {
			return s.natsBench(ctx, natsAddr["gateway"], publishSubject, acme, natsSizes[0].bytes, messages, false)
		},
	})
	// Delivery: acme's subscriber has a consume limit it never reaches (each read's deliveries
	// are charged), reader's has none (they pass uncharged).
	deliverUser := func(target string) tenant {
		if target == "gateway-unlimited" {
			return reader
		}
		return natsUser(target)
	}
	natsAddr["gateway-unlimited"] = natsAddr["gateway"]
	for _, n := range natsSizes {
		out = append(out, cpuWorkload{
			workloadShape: workloadShape{Direction: natsDelivery, Bytes: n.bytes, Records: 1},
			messages:      n.messages / scale,
			targets:       append([]string{"gateway", "gateway-unlimited", "tcp-proxy"}, floorTargets...),
			send: func(ctx context.Context, target string, messages int) (float64, error) {
				return s.natsDeliver(ctx, natsAddr[target], deliverUser(target), n.bytes, messages)
			},
		})
	}
	// Both Kafka listeners reach the same broker listener, as the gateway; acme by its client id.
	kafkaAddr := map[string]string{"gateway": s.stack.Addr("KAFKA_PORT"), "tcp-proxy": s.stack.Addr("KAFKA_PLAIN_PORT"),
		"gateway-open": s.stack.Addr("KAFKA_PORT"), wasmNoop: s.stack.Addr("KAFKA_NOOP_WASM_PORT"), nativeNoop: s.stack.Addr("KAFKA_NOOP_NATIVE_PORT")}
	for _, p := range produceShapes {
		targets := []string{"gateway", "tcp-proxy"}
		if p.records == 1 {
			targets = append(targets, "gateway-open")
		}
		// The floors at one small record alone: a request's fixed cost.
		if p.records == 1 && p.bytes == 100 {
			targets = append(targets, floorTargets...)
		}
		out = append(out, cpuWorkload{
			workloadShape: workloadShape{Direction: kafkaProduce, Bytes: p.bytes, Records: p.records},
			messages:      p.requests / scale,
			targets:       targets,
			send: func(ctx context.Context, target string, requests int) (float64, error) {
				client := acme.kafkaClientID
				if target == "gateway-open" {
					client = reader.kafkaClientID
				}
				return produceOnOneConnection(ctx, kafkaAddr[target], client, produceTopic, p.records, p.bytes, requests)
			},
		})
	}
	// The read side: acme's consumers have a consume limit they never reach (each response is
	// walked and charged), reader's have none (responses pass unread).
	fetchClient := map[string]string{"gateway": acme.kafkaClientID, "gateway-unlimited": reader.kafkaClientID, "tcp-proxy": acme.kafkaClientID}
	fetchAddr := map[string]string{"gateway": kafkaAddr["gateway"], "gateway-unlimited": kafkaAddr["gateway"], "tcp-proxy": kafkaAddr["tcp-proxy"]}
	for _, f := range fetchSizes {
		out = append(out, cpuWorkload{
			workloadShape: workloadShape{Direction: kafkaFetch, Bytes: f.bytes, Records: 1},
			messages:      f.requests / scale,
			targets:       []string{"gateway", "gateway-unlimited", "tcp-proxy"},
			send: func(ctx context.Context, target string, requests int) (float64, error) {
				if err := s.fetchTopicFilled(ctx, kafkaAddr["gateway"]); err != nil {
					return 0, err
				}
				return fetchOnOneConnection(ctx, fetchAddr[target], fetchClient[target], f.bytes, requests)
			},
		})
	}
	out = append(out, cpuWorkload{
		workloadShape: workloadShape{Direction: kafkaProducerPerf, Bytes: 128, Records: 1},
		messages:      1_000_000 / scale,
		targets:       []string{"gateway", "direct"},
		send: func(ctx context.Context, target string, messages int) (float64, error) {
			if target == "direct" {
				return s.producerPerf(ctx, s.stack.Addr("KAFKA_DIRECT_PORT"), 128, messages, baselineSASL()...)
			}
			return s.producerPerf(ctx, s.stack.Addr("KAFKA_PORT"), 128, messages)
		},
	})
	return out
}
