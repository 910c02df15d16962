package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestCaptureSaramaSeeds records what sarama sends a broker, as seeds for the Kafka fuzz target
// (wasm-filter/fuzz/seeds/kafka_requests). It runs only when asked:
//
//	WEIGHSTATION_CAPTURE_SEEDS=$PWD/../wasm-filter/fuzz/seeds/kafka_requests go test ./e2e -run TestCaptureSaramaSeeds
func TestCaptureSaramaSeeds(t *testing.T) {
	dir := os.Getenv("WEIGHSTATION_CAPTURE_SEEDS")
	if dir == "" {
		t.Skip("set WEIGHSTATION_CAPTURE_SEEDS to a directory to record seeds")
	}
	cases := []struct {
		name  string
		setup func(*sarama.Config)
	}{
		{"v2.1-acks-all", func(c *sarama.Config) { c.Version = sarama.V2_1_0_0 }},
		{"v3.6-acks-one-snappy", func(c *sarama.Config) {
			c.Producer.RequiredAcks = sarama.WaitForLocal
			c.Producer.Compression = sarama.CompressionSnappy
		}},
		{"v3.6-acks-zero-zstd", func(c *sarama.Config) {
			c.Producer.RequiredAcks = sarama.NoResponse
			c.Producer.Compression = sarama.CompressionZSTD
		}},
		{"v3.6-lz4-batch", func(c *sarama.Config) {
			c.Producer.Compression = sarama.CompressionLZ4
			c.Producer.Flush.Messages = 10
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, proxy := recordingProxy(t, addr(ports.KafkaDirect))
			cfg := asBaseline(kafkaConfig("acme-seed-" + c.name))
			c.setup(cfg)
			cfg.Producer.Return.Successes = cfg.Producer.RequiredAcks != sarama.NoResponse
			// One broker connection through the recorder: ApiVersions, Metadata and a Produce.
			b := sarama.NewBroker(proxy)
			if err := b.Open(cfg); err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			topic := "seeds"
			if _, err := b.GetMetadata(&sarama.MetadataRequest{Version: 4, Topics: []string{topic}, AllowAutoTopicCreation: true}); err != nil {
				t.Fatal(err)
			}
			set := &sarama.RecordBatch{Version: 2, Codec: cfg.Producer.Compression, FirstTimestamp: time.Now(), MaxTimestamp: time.Now(),
				ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1}
			for i := 0; i < 5; i++ {
				set.Records = append(set.Records, &sarama.Record{Key: []byte(fmt.Sprint(i)), Value: []byte("seed record")})
			}
			version := int16(7)
			if cfg.Version.IsAtLeast(sarama.V3_6_0_0) {
				version = 9
			}
			req := &sarama.ProduceRequest{RequiredAcks: cfg.Producer.RequiredAcks, Timeout: 10000, Version: version}
			req.AddBatch(topic, 0, set)
			if _, err := b.Produce(req); err != nil {
				t.Fatal(err)
			}
			b.Close()
			time.Sleep(100 * time.Millisecond)
			// The first byte of a seed is the fuzz target's chunk size.
			if err := os.WriteFile(filepath.Join(dir, "sarama-"+c.name), append([]byte{0xff}, rec()...), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// recordingProxy forwards one client's connections to upstream and records what the clients send.
func recordingProxy(t *testing.T, upstream string) (func() []byte, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var mu sync.Mutex
	var sent []byte
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(c, u); c.Close() }()
			go func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						mu.Lock()
						sent = append(sent, buf[:n]...)
						mu.Unlock()
						_, _ = u.Write(buf[:n])
					}
					if err != nil {
						u.Close()
						return
					}
				}
			}()
		}
	}()
	return func() []byte { mu.Lock(); defer mu.Unlock(); return append([]byte(nil), sent...) }, l.Addr().String()
}
