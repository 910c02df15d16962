package main

import (
	"strings"
	"testing"
)

// The CPU section shows each cost, each comparison with its goal met or missed, the Produce
// scaling goals and the cost per KiB.
func TestMarkdownCPUSection(t *testing.T) {
	s := &suite{timing: fullTiming}
	for _, size := range []int{128, 1024} {
		s.CPU = append(s.CPU,
			measured(shape(natsPublish, 1, size), "gateway", 0.3+float64(size)/1024, 1000),
			measured(shape(natsPublish, 1, size), "tcp-proxy", 0.2+float64(size)/1024, 1000))
	}
	for _, records := range []int{1, 100} {
		s.CPU = append(s.CPU,
			measured(shape(kafkaProduce, records, 100), "gateway", 50+float64(records), 1000),
			measured(shape(kafkaProduce, records, 100), "tcp-proxy", 40, 1000))
	}
	s.CPU = append(s.CPU, measured(shape(kafkaProducerPerf, 1, 128), "gateway", 0.6, 900), measured(shape(kafkaProducerPerf, 1, 128), "direct", 0, 1000))
	var b strings.Builder
	writeMarkdown(&b, host{Cores: 2, CPU: "Test CPU", Commit: "abc1234"}, s)
	md := b.String()
	for _, want := range []string{
		"| nats pub 128 B | gateway | 1000000 | 1000 (1000–1000) | 0.425 (0.425–0.425) |  |",
		"| kafka produce 100 × 100 B | gateway | 1000000 | 1000 (1000–1000) | 150.000 (150.000–150.000) | 1.5000 |",
		"| nats pub 128 B | gateway over tcp-proxy | 0.100 (0.100–0.100) | 100% (100–100%) | ≤ 0.2 µs | **met** |",
		"| nats pub 1 KiB | gateway over tcp-proxy | 0.100 (0.100–0.100) | 100% (100–100%) | ≤ 0.2 µs, ≥ 90% | **met** |",
		"| kafka produce 1 × 100 B | gateway over tcp-proxy | 11.000 (11.000–11.000) | 100% (100–100%) | ≤ 5 µs | **missed** |",
		"| kafka produce 128 B acks=1 | gateway over direct | 0.600 (0.600–0.600) | 90% (90–90%) | — |  |",
		"| each more record: 100 vs 1 record of 100 B per request | 1.0000 | ≤ 0.05 µs | **missed** |",
		"| nats pub | gateway | 128 B–1 KiB | 0.300 | 1.0000 |",
		"| nats pub | tcp-proxy | 128 B–1 KiB | 0.200 | 1.0000 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}
