package e2e

import (
	"crypto/x509/pkix"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// A reject tenant under its limit is never refused, whatever listener, SASL mechanism and client
// (issue 25): 500 records/s with the default burst, one second of the rate, as a tenant gets it
// when it sets none. (With a burst of 50, 0.1 s of the rate, a tenant at 90% is refused whenever
// its client, the network or the machine stalls for 0.11 s: its records then come at once, over
// the bucket, and the refused client's mute and retry make a larger burst still. Under a busy
// core, one cell in 48 saw 113 refusals so. That is the bucket doing its work: docs/kafka.md.)
const underLimit, underBurst, underRecordBytes = 500.0, 500, 100

// underLimitTransports are the ways a producer authenticates to the gateway. Each gets two
// tenants per client (see underLimitTenant), identified by the SASL principal or the client
// certificate the test presents, never by client.id.
var underLimitTransports = []struct {
	name string
	// port is the gateway listener; props are the Java producer's properties and conf
	// librdkafka's, for tenant (the principal, the certificate's file name).
	port  func() int
	props func(tenant string) map[string]string
	conf  func(tenant string) map[string]string
}{
	{"plain", func() int { return ports.KafkaSASL },
		func(u string) map[string]string { return javaSASL("PLAIN", u) },
		func(u string) map[string]string { return rdkSASL(false, "PLAIN", u) }},
	{"scram256", func() int { return ports.KafkaSASL },
		func(u string) map[string]string { return javaSASL("SCRAM-SHA-256", u) },
		func(u string) map[string]string { return rdkSASL(false, "SCRAM-SHA-256", u) }},
	{"scram512", func() int { return ports.KafkaSASL },
		func(u string) map[string]string { return javaSASL("SCRAM-SHA-512", u) },
		func(u string) map[string]string { return rdkSASL(false, "SCRAM-SHA-512", u) }},
	{"oauth", func() int { return ports.KafkaSASL },
		func(u string) map[string]string { return javaSASL("OAUTHBEARER", u) },
		func(u string) map[string]string { return rdkSASL(false, "OAUTHBEARER", u) }},
	{"saslssl", func() int { return ports.KafkaSASLSSL },
		func(u string) map[string]string { return withJavaTLS(javaSASL("SCRAM-SHA-512", u)) },
		func(u string) map[string]string { return rdkSASL(true, "SCRAM-SHA-512", u) }},
	{"mtls", func() int { return ports.KafkaTLS },
		func(u string) map[string]string {
			return map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": tlsFile("ca.crt"),
				"ssl.keystore.type": "PEM", "ssl.keystore.location": tlsFile(u + ".pem")}
		},
		func(u string) map[string]string {
			return map[string]string{"security.protocol": "SSL", "ssl.ca.location": tlsFile("ca.crt"),
				"ssl.certificate.location": tlsFile(u + ".crt"), "ssl.key.location": tlsFile(u + ".key")}
		}},
}

var underLimitClients = []string{"java", "librdkafka"}

// underLimitTenant names a tenant of the test: two per client and transport, so that each of
// 50% and 90% is run once on a tenant nothing has used yet (fresh: a full bucket, a topic that
// does not exist, a client starting cold) and once right after the other rate (warm).
func underLimitTenant(client, transport string, second bool) string {
	return fmt.Sprintf("under-%s-%s-%s", client, transport, map[bool]string{false: "a", true: "b"}[second])
}

// underLimitTenants lists every tenant of the test, for the stack's SASL users.
func underLimitTenants() []string {
	var names []string
	for _, c := range underLimitClients {
		for _, tr := range underLimitTransports {
			names = append(names, underLimitTenant(c, tr.name, false), underLimitTenant(c, tr.name, true))
		}
	}
	return names
}

// writeUnderLimitPolicies writes a reject policy for each tenant of the test into dir.
func writeUnderLimitPolicies(dir string) error {
	var docs []string
	for _, name := range underLimitTenants() {
		identify := fmt.Sprintf("    kafka: { saslPrincipals: [%[1]s] }\n    tls: { subjects: [\"CN=%[1]s,O=weighstation-e2e\"] }\n", name)
		spec := fmt.Sprintf("  onLimit: reject\n  limits:\n    maxMessageBytes: 64KiB\n    rate: { messagesPerSecond: %.0f }\n    inFlight: 20\n", underLimit)
		docs = append(docs, tenantPolicy(name, identify, spec))
	}
	return writePolicies(dir, "under-limit.yaml", docs)
}

// issueJavaClientCertificate issues <name>.crt|key, known by its subject CN=<name>,O=weighstation-e2e,
// and <name>.pem, the key and certificate in one file as the Java client's PEM keystore reads them.
func issueJavaClientCertificate(t *testing.T, name string) {
	t.Helper()
	if err := stack.IssueClientCertificate(name, pkix.Name{CommonName: name, Organization: []string{"weighstation-e2e"}}, ""); err != nil {
		t.Fatal(err)
	}
	var pem []byte
	for _, f := range []string{".key", ".crt"} {
		b, err := os.ReadFile(tlsFile(name + f))
		if err != nil {
			t.Fatal(err)
		}
		pem = append(pem, b...)
	}
	if err := os.WriteFile(tlsFile(name+".pem"), pem, 0o600); err != nil {
		t.Fatal(err)
	}
}

func javaSASL(mechanism, user string) map[string]string {
	module := "org.apache.kafka.common.security.plain.PlainLoginModule"
	creds := fmt.Sprintf(`username="%s" password="%s-secret"`, user, user)
	switch {
	case strings.HasPrefix(mechanism, "SCRAM"):
		module = "org.apache.kafka.common.security.scram.ScramLoginModule"
	case mechanism == "OAUTHBEARER":
		// An unsecured JWT whose sub is the user: the local broker's validator takes it.
		module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
		creds = fmt.Sprintf(`unsecuredLoginStringClaim_sub="%s"`, user)
	}
	return map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
		"sasl.jaas.config": module + " required " + creds + ";"}
}

func rdkSASL(tls bool, mechanism, user string) map[string]string {
	conf := map[string]string{"sasl.mechanism": mechanism}
	if mechanism == "OAUTHBEARER" {
		conf["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
		conf["sasl.oauthbearer.config"] = "principal=" + user
	} else {
		conf["sasl.username"], conf["sasl.password"] = user, user+"-secret"
	}
	return librdkafkaSASL(tls, conf)
}

// Each client, on each transport, produces at 50% and at 90% of a reject tenant's limit, on a
// fresh tenant and on a warm one: nothing is refused, every record is acknowledged and stored,
// and the tenant is charged what was acknowledged (a retried batch is charged once) within the
// burst. The probes start their open-loop schedule once the client has its metadata: a schedule
// that starts while the client cannot send yet offers its backlog at once, over the burst (the
// cause of the refusals issue 25 measured; docs/kafka.md).
func TestKafkaTenantUnderItsLimitIsNeverRefused(t *testing.T) {
	const window = 2 * time.Second
	for _, tr := range underLimitTransports {
		for _, client := range underLimitClients {
			t.Run(client+"/"+tr.name, func(t *testing.T) {
				for _, second := range []bool{false, true} {
					tenant := underLimitTenant(client, tr.name, second)
					if tr.name == "mtls" {
						issueJavaClientCertificate(t, tenant)
					}
					topic := tenant + "-orders"
					shares := []float64{0.5, 0.9}
					if second {
						shares = []float64{0.9, 0.5}
					}
					for i, share := range shares {
						state := map[bool]string{true: "fresh", false: "warm"}[i == 0]
						clientID := fmt.Sprintf("%s-%d", tenant, i)
						accepted0 := metric(t, "weighstation_messages_accepted", kafkaLabels(tenant))
						refused0 := metricTotal(t, "weighstation_messages_refused", kafkaLabels(tenant))
						var run clientRun
						if client == "java" {
							run = javaProducerWith(t, addr(tr.port()), tr.props(tenant), topic, clientID, share*underLimit, window, underRecordBytes)
						} else {
							run = librdkafkaProducerWith(t, addr(tr.port()), tr.conf(tenant), topic, clientID, share*underLimit, window, underRecordBytes)
						}
						refused := metricTotal(t, "weighstation_messages_refused", kafkaLabels(tenant)) - refused0
						var charged float64
						eventually(t, 5*time.Second, "the acknowledged records are charged", func() bool {
							charged = metric(t, "weighstation_messages_accepted", kafkaLabels(tenant)) - accepted0
							return charged >= float64(run.acked)
						})
						stored := recordsOf(topicRecords(t, topic), clientID)
						t.Logf("%s %s %.0f%% %s: sent %d, acked %d, failed %d (%s), stored %d; refused %.0f, charged %.0f",
							client, tr.name, share*100, state, run.sent, run.acked, run.failed, orNone(run.errors), stored, refused, charged)
						if run.sent == 0 || run.acked != run.sent || stored != run.acked {
							t.Errorf("%.0f%% %s: sent %d, acked %d, stored %d\n%s", share*100, state, run.sent, run.acked, stored, run.log)
						}
						if refused != 0 {
							t.Errorf("%.0f%% %s: the gateway refused %.0f records of a tenant under its limit", share*100, state, refused)
						}
						if charged > float64(run.acked+underBurst) {
							t.Errorf("%.0f%% %s: charged %.0f records for %d acknowledged (a retried batch charged again)", share*100, state, charged, run.acked)
						}
					}
				}
			})
		}
	}
}
