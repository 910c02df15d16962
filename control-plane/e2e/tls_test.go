package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
)

func tlsFile(name string) string { return filepath.Join(stack.TLSDir(), name) }

// clientTLS trusts the local CA and, if cert is set, presents run/tls/<cert>.crt.
func clientTLS(t *testing.T, cert string) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: certPool(t, tlsFile("ca.crt")), MinVersion: tls.VersionTLS12}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(tlsFile(cert+".crt"), tlsFile(cert+".key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// natsTLS connects to the TLS-first listener as nats.go users do it.
func natsTLS(t *testing.T, opts ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	opts = append([]nats.Option{nats.Secure(clientTLS(t, "")), nats.TLSHandshakeFirst(), nats.Timeout(5 * time.Second)}, opts...)
	return nats.Connect("tls://"+addr(ports.NATSTLS), opts...)
}

// nats.go and the nats CLI reach nats-server through the TLS-first listener with an nkey, and
// are charged to its tenant; a client certificate alone attributes a connection that sends no
// credentials.
func TestNATSOverTLSFirst(t *testing.T) {
	nkey, err := nats.NkeyOptionFromSeed(filepath.Join(stack.NkeyDir(), "acme.nk"))
	if err != nil {
		t.Fatal(err)
	}
	acme := map[string]string{"protocol": "nats", "tenant": "acme"}
	globex := map[string]string{"protocol": "nats", "tenant": "globex"}
	t.Run("nats.go nkey", func(t *testing.T) {
		before := metric(t, "weighstation_messages_accepted", acme)
		nc, err := natsTLS(t, nkey)
		if err != nil {
			t.Fatalf("nats.go over TLS with an nkey: %v", err)
		}
		defer nc.Close()
		if !nc.TLSRequired() {
			t.Error("the INFO did not say the connection is TLS")
		}
		publishAndReceive(t, nc, "tls.orders", 20)
		if d := metric(t, "weighstation_messages_accepted", acme) - before; d != 20 {
			t.Errorf("acme charged %.0f messages, want 20", d)
		}
	})
	t.Run("nats CLI nkey", func(t *testing.T) {
		before := metric(t, "weighstation_messages_accepted", acme)
		out, err := exec.Command(filepath.Join(root, ".tools/bin/nats"), "--server", "tls://"+addr(ports.NATSTLS),
			"--tlsca", tlsFile("ca.crt"), "--tlsfirst", "--nkey", filepath.Join(stack.NkeyDir(), "acme.nk"),
			"pub", "tls.cli", "hello", "--count", "5").CombinedOutput()
		if err != nil {
			t.Fatalf("nats pub over TLS: %v\n%s", err, out)
		}
		if d := metric(t, "weighstation_messages_accepted", acme) - before; d != 5 {
			t.Errorf("acme charged %.0f messages, want 5\n%s", d, out)
		}
	})
	t.Run("client certificate", func(t *testing.T) {
		before := metric(t, "weighstation_messages_accepted", globex)
		nc, err := nats.Connect("tls://"+addr(ports.NATSTLS), nats.Secure(clientTLS(t, "globex")), nats.TLSHandshakeFirst())
		if err != nil {
			t.Fatalf("nats.go with globex's certificate: %v", err)
		}
		defer nc.Close()
		publishAndReceive(t, nc, "tls.cert", 10)
		if d := metric(t, "weighstation_messages_accepted", globex) - before; d != 10 {
			t.Errorf("globex (by its certificate's SAN) charged %.0f messages, want 10", d)
		}
	})
}

// A client that does the classic upgrade (a plaintext INFO first) on the TLS-first listener is
// told which option to set, instead of waiting out its timeout.
func TestNATSClassicUpgradeOnTheTLSFirstListenerIsAClearError(t *testing.T) {
	_, err := nats.Connect("nats://"+addr(ports.NATSTLS), nats.Timeout(5*time.Second))
	if err == nil || !strings.Contains(err.Error(), "TLS handshake first") || !strings.Contains(err.Error(), "TLSHandshakeFirst()") {
		t.Errorf("a plaintext client: %v", err)
	}
	_, err = nats.Connect("tls://"+addr(ports.NATSTLS), nats.Secure(clientTLS(t, "")), nats.Timeout(5*time.Second))
	if !errors.Is(err, nats.ErrSecureConnWanted) {
		t.Errorf("a TLS client without the handshake first: %v, want %v", err, nats.ErrSecureConnWanted)
	}
}

// franzMTLS produces n records, one every 10 ms, through the mTLS Kafka listener with franz-go,
// presenting run/tls/<cert>.crt, and returns how many were acknowledged.
func franzMTLS(t *testing.T, cert, clientID, topic string, n int, opts ...kgo.Opt) int {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr(ports.KafkaTLS)), kgo.DialTLSConfig(clientTLS(t, cert)),
		kgo.ClientID(clientID), kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(10 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond), kgo.AllowAutoTopicCreation(),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var acked atomic.Int64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range n {
		<-tick.C
		cl.Produce(context.Background(), &kgo.Record{Value: []byte("x")}, func(_ *kgo.Record, err error) {
			if err == nil {
				acked.Add(1)
			}
		})
	}
	_ = cl.Flush(context.Background())
	return int(acked.Load())
}

// franz-go with a client certificate the gateway verified is charged to the tenant its subject
// or SAN names — whatever client.id it claims — and limited by that tenant's policy.
func TestKafkaMutualTLSClientIsAttributedByItsCertificate(t *testing.T) {
	for _, c := range []struct{ cert, tenant, claims string }{
		{"acme", "acme", "globex-claims-this"},   // by subject
		{"globex", "globex", "acme-claims-this"}, // by URI SAN
	} {
		t.Run(c.cert, func(t *testing.T) {
			labels := map[string]string{"protocol": "kafka", "tenant": c.tenant}
			before := metric(t, "weighstation_messages_accepted", labels)
			if acked := franzMTLS(t, c.cert, c.claims, "mtls-orders", 30); acked != 30 {
				t.Fatalf("%d of 30 records acknowledged", acked)
			}
			eventually(t, 5*time.Second, "the records are charged to "+c.tenant, func() bool {
				return metric(t, "weighstation_messages_accepted", labels)-before == 30
			})
		})
	}
	t.Run("limited by its policy", func(t *testing.T) {
		if err := stack.IssueClientCertificate("cert-limited", pkix.Name{CommonName: "cert-limited", Organization: []string{"weighstation-e2e"}}, ""); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{"protocol": "kafka", "tenant": "cert-limited"}
		refused0 := metricTotal(t, "weighstation_messages_refused", labels)
		// 200 records at 100/s against 20/s with a burst of 20: the gateway refuses the excess
		// with THROTTLING_QUOTA_EXCEEDED, which franz-go retries until its delivery timeout.
		acked := franzMTLS(t, "cert-limited", "any-id", "mtls-limited", 200, kgo.RecordDeliveryTimeout(2*time.Second), kgo.ProducerLinger(0))
		refused := metricTotal(t, "weighstation_messages_refused", labels) - refused0
		t.Logf("cert-limited: 200 records at 100/s, %d acknowledged, %0.f refusals", acked, refused)
		if refused == 0 {
			t.Errorf("the tenant's 20/s limit did not apply: %d acknowledged, %.0f refusals", acked, refused)
		}
	})
}

// A rotated server certificate is used by the next handshake, and the connections open before
// it — a NATS publisher and a Kafka producer, both sending — carry on without a drop.
func TestServerCertificateRotationUnderLoad(t *testing.T) {
	nkey, err := nats.NkeyOptionFromSeed(filepath.Join(stack.NkeyDir(), "acme.nk"))
	if err != nil {
		t.Fatal(err)
	}
	var natsDrops, kafkaDrops atomic.Int64
	nc, err := natsTLS(t, nkey, nats.DisconnectErrHandler(func(*nats.Conn, error) { natsDrops.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub := directNATS(t)
	got, err := sub.SubscribeSync("rotation.orders")
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.Flush()
	kafka, err := kgo.NewClient(kgo.SeedBrokers(addr(ports.KafkaTLS)), kgo.DialTLSConfig(clientTLS(t, "acme")),
		kgo.DefaultProduceTopic("rotation-orders"), kgo.ClientID("acme-rotation"), kgo.AllowAutoTopicCreation(),
		kgo.WithHooks(brokerDisconnects{&kafkaDrops}))
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	if err := kafka.ProduceSync(context.Background(), &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kafkaDrops.Store(0) // the bootstrap connection is done with once the broker's is open
	serial := func(port int, cert string) string {
		c, err := tls.Dial("tcp", addr(port), clientTLS(t, cert))
		if err != nil {
			t.Fatalf("handshake on %d: %v", port, err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial(ports.NATSTLS, "")

	stop := make(chan struct{})
	done := make(chan struct{})
	var published, produced, producedErrs atomic.Int64
	go func() { // 200 NATS messages and 50 Kafka records a second until stopped
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if nc.Publish("rotation.orders", []byte("x")) == nil {
				published.Add(1)
			}
			if i%4 == 0 {
				kafka.Produce(context.Background(), &kgo.Record{Value: []byte("x")}, func(_ *kgo.Record, err error) {
					if err != nil {
						producedErrs.Add(1)
					} else {
						produced.Add(1)
					}
				})
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	next, err := stack.RotateServerCertificate()
	if err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 10*time.Second, "new handshakes see the rotated certificate", func() bool {
		return serial(ports.NATSTLS, "") == next.String() && serial(ports.KafkaTLS, "acme") == next.String()
	})
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = kafka.Flush(context.Background())
	for i := range published.Load() {
		if _, err := got.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("message %d of %d not delivered: %v", i+1, published.Load(), err)
		}
	}
	t.Logf("certificate %s… → %s… in %s; meanwhile %d NATS messages delivered, %d Kafka records acknowledged (%d failed)",
		before[:8], next.String()[:8], took.Round(time.Millisecond), published.Load(), produced.Load(), producedErrs.Load())
	if before == next.String() {
		t.Fatal("the rotation issued the same serial")
	}
	if natsDrops.Load() != 0 || kafkaDrops.Load() != 0 || producedErrs.Load() != 0 || !nc.IsConnected() {
		t.Errorf("connections dropped: NATS %d, Kafka %d; Kafka records failed: %d", natsDrops.Load(), kafkaDrops.Load(), producedErrs.Load())
	}
}

// brokerDisconnects counts franz-go's broker connections that closed.
type brokerDisconnects struct{ n *atomic.Int64 }

func (b brokerDisconnects) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { b.n.Add(1) }

// The broker's TLS listener behind the gateway admits only the gateway's client certificate: a
// client that dials it directly with a certificate of its own — one the gateway itself accepts —
// is refused before its first request is answered.
func TestKafkaBrokerTLSListenerRefusesAClientAroundTheGateway(t *testing.T) {
	cfg := clientTLS(t, "acme")
	cfg.RootCAs = certPool(t, tlsFile("broker-ca.crt"))
	c, err := tls.Dial("tcp", addr(ports.KafkaSSLUp), cfg)
	if err == nil {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		// TLS 1.3 reports a refused client certificate on the first read.
		if _, err = c.Write(kafkaRequest(18, 0, 1, nil)); err == nil {
			_, err = c.Read(make([]byte, 64))
		}
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client certificate that is not the gateway's, dialing the broker: %v", err)
	}
}
