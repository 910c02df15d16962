package e2e

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The shipped policies' tenants (policies/: acme, globex, and the default tenant anonymous) and
// the credentials make run gives them: NATS password and nkey users (anon for clients that send
// none), Kafka SASL users, client certificates.
var shippedNATSCredentials = []struct {
	name string
	opt  func(t *testing.T) nats.Option
}{
	{"acme password", func(*testing.T) nats.Option { return nats.UserInfo("acme", "acme-secret") }},
	{"globex password", func(*testing.T) nats.Option { return nats.UserInfo("globex", "globex-secret") }},
	{"no credentials (anon)", func(*testing.T) nats.Option { return func(*nats.Options) error { return nil } }},
	{"acme nkey", func(t *testing.T) nats.Option { return nkeyOption(t, "acme") }},
	{"globex nkey", func(t *testing.T) nats.Option { return nkeyOption(t, "globex") }},
}

func nkeyOption(t *testing.T, tenant string) nats.Option {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(filepath.Join(stack.NkeyDir(), tenant+".nk"))
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// unsecuredJWT is an OAUTHBEARER token the local broker's unsecured validator takes for sub.
func unsecuredJWT(sub string) string {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now().Unix()
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, sub, now, now+3600))) + "."
}

// kafkaCredential is how a client is known to Kafka: a SASL mechanism, a certificate, or a
// claimed client.id.
type kafkaCredential struct {
	name     string
	sasl     sasl.Mechanism
	cert     string // run/tls/<cert>.crt
	clientID string
}

func shippedKafkaCredentials() []kafkaCredential {
	var creds []kafkaCredential
	for _, u := range []string{"acme-svc", "globex-svc"} {
		creds = append(creds,
			kafkaCredential{name: u + " PLAIN", sasl: plain.Auth{User: u, Pass: u + "-secret"}.AsMechanism()},
			kafkaCredential{name: u + " SCRAM-SHA-256", sasl: scram.Auth{User: u, Pass: u + "-secret"}.AsSha256Mechanism()},
			kafkaCredential{name: u + " SCRAM-SHA-512", sasl: scram.Auth{User: u, Pass: u + "-secret"}.AsSha512Mechanism()},
			kafkaCredential{name: u + " OAUTHBEARER", sasl: oauth.Auth{Token: unsecuredJWT(u)}.AsMechanism()})
	}
	return append(creds, kafkaCredential{name: "acme certificate", cert: "acme"}, kafkaCredential{name: "globex certificate", cert: "globex"},
		kafkaCredential{name: "acme client.id", clientID: "acme-hidden-path"}, kafkaCredential{name: "globex client.id", clientID: "globex-hidden-path"})
}

// kafkaPing connects with cred (over TLS trusting ca, if set) and asks for metadata.
func kafkaPing(t *testing.T, address string, cred kafkaCredential, ca string) error {
	t.Helper()
	clientID := cmp.Or(cred.clientID, "hidden-path")
	opts := []kgo.Opt{kgo.SeedBrokers(address), kgo.ClientID(clientID), kgo.RequestRetries(0),
		kgo.DialTimeout(2 * time.Second), kgo.RequestTimeoutOverhead(2 * time.Second)}
	if cred.sasl != nil {
		opts = append(opts, kgo.SASL(cred.sasl))
	}
	if ca != "" {
		cfg := clientTLS(t, cred.cert)
		cfg.RootCAs = certPool(t, tlsFile(ca))
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// No identity a shipped policy maps to a tenant reaches a broker around the gateway (issue 25):
// every broker listener is dialled with every shipped credential and refuses it, while the same
// credential works through the gateway (so each refusal is the broker's, not a bad credential).
// Kafka's TLS listeners are dialled trusting their CA, so a refusal is the missing gateway
// client certificate. A client.id is a claim, not a credential, but it names a tenant too: no
// listener admits a client that has nothing else.
func TestNoTenantCredentialReachesABrokerDirectly(t *testing.T) {
	for _, c := range shippedNATSCredentials {
		t.Run("nats/"+c.name, func(t *testing.T) {
			nc, err := nats.Connect("nats://"+addr(ports.NATS), c.opt(t), nats.Timeout(5*time.Second), nats.NoReconnect())
			if err != nil {
				t.Fatalf("through the gateway: %v", err)
			}
			nc.Close()
			nc, err = nats.Connect("nats://"+addr(ports.NATSUpstream), c.opt(t), nats.Timeout(5*time.Second), nats.NoReconnect())
			if err == nil {
				nc.Close()
				t.Fatal("nats-server admitted it directly")
			}
			if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Fatalf("directly: %v, want an authorization violation (proxy_required)", err)
			}
		})
	}
	listeners := []struct {
		name string
		port int
		ca   string // the CA its certificate chains to, if it is TLS
	}{
		{"GATEWAY (the gateway's upstream)", ports.KafkaUpstream, "broker-ca.crt"},
		{"DIRECT", ports.KafkaDirect, ""},
		{"CONTROLLER", ports.KafkaController, ""},
		{"SASL", ports.KafkaSASLUp, "broker-ca.crt"},
		{"SSL", ports.KafkaSSLUp, "broker-ca.crt"},
		{"SASLSSL", ports.KafkaSASLSSLUp, "broker-ca.crt"},
	}
	for _, cred := range shippedKafkaCredentials() {
		t.Run("kafka/"+cred.name, func(t *testing.T) {
			via, ca := ports.KafkaSASL, ""
			switch {
			case cred.cert != "":
				via, ca = ports.KafkaTLS, "ca.crt"
			case cred.clientID != "":
				via = ports.Kafka
			}
			if err := kafkaPing(t, addr(via), cred, ca); err != nil {
				t.Fatalf("through the gateway: %v", err)
			}
			for _, l := range listeners {
				ca := l.ca
				if cred.cert != "" && ca == "" {
					ca = "broker-ca.crt" // a certificate is presented over TLS, whatever the listener
				}
				began := time.Now()
				err := kafkaPing(t, addr(l.port), cred, ca)
				if err == nil {
					t.Errorf("%s (%d) admitted it directly", l.name, l.port)
					continue
				}
				t.Logf("%s: refused in %s: %v", l.name, time.Since(began).Round(time.Millisecond), err)
			}
		})
	}
}
