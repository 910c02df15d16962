package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad values file is refused before anything reaches the cluster, with a message naming the
// value and what is wrong with it (values.schema.json, and the chart's own checks for what a
// schema cannot say).
func TestBadValuesAreRejectedWithClearMessages(t *testing.T) {
	cases := []struct {
		name, values string
		want         []string
	}{
		{"negative replicas", "envoy:\n  replicas: -1\n",
			[]string{"at '/envoy/replicas': minimum: got -1, want 0"}},
		{"unknown key (typo)", "envoy:\n  replica: 3\n",
			[]string{"at '/envoy': additional properties 'replica' not allowed"}},
		{"unknown top-level key", "kafkaa:\n  enabled: true\n",
			[]string{"additional properties 'kafkaa' not allowed"}},
		{"wrong type", "nats:\n  port: \"4222\"\n",
			[]string{"at '/nats/port': got string, want integer"}},
		{"port out of range", "kafka:\n  port: 70000\n",
			[]string{"at '/kafka/port': maximum: got 70,000, want 65,535"}},
		{"broker without a port", "kafka:\n  brokers: [kafka-0.kafka:9092, kafka-1.kafka]\n",
			[]string{"at '/kafka/brokers/1'", "does not match pattern"}},
		{"NATS URL with credentials", "nats:\n  servers: [\"nats://admin:secret@nats:4222\"]\n",
			[]string{"at '/nats/servers/0'", "does not match pattern"}},
		{"NATS advertise without a port", "nats:\n  advertise: [nats.example.com]\n",
			[]string{"at '/nats/advertise/0'", "does not match pattern"}},
		{"NATS TLS advertise as a URL", "tls:\n  nats:\n    advertise: [\"tls://nats.example.com:4443\"]\n",
			[]string{"at '/tls/nats/advertise/0'", "does not match pattern"}},
		{"NATS advertise as a string", "nats:\n  advertise: nats.example.com:4222\n",
			[]string{"at '/nats/advertise': got string, want array"}},
		{"NATS server policy without a port", "networkPolicy:\n  natsServers:\n    enabled: true\n    ports: []\n",
			[]string{"at '/networkPolicy/natsServers/ports': minItems: got 0, want 1"}},
		{"NATS server policy with an unknown key", "networkPolicy:\n  natsServers:\n    selector: {}\n",
			[]string{"at '/networkPolicy/natsServers': additional properties 'selector' not allowed"}},
		{"no brokers", "kafka:\n  brokers: []\n",
			[]string{"kafka.brokers is empty: list every broker, host:port as each advertises itself, or set kafka.cluster.enabled"}},
		{"hidden policy file", "policies:\n  files:\n    .acme.yaml: \"x\"\n",
			[]string{"at '/policies/files': additional properties '.acme.yaml' not allowed"}},
		{"policy file that is not YAML", "policies:\n  files:\n    acme.json: \"{}\"\n",
			[]string{"at '/policies/files': additional properties 'acme.json' not allowed"}},
		{"bad duration", "controlPlane:\n  debounce: fast\n",
			[]string{"at '/controlPlane/debounce'", "does not match pattern"}},
		{"bad service type", "envoy:\n  service:\n    type: Ingress\n",
			[]string{"at '/envoy/service/type'", "value must be one of 'ClusterIP', 'NodePort', 'LoadBalancer'"}},
		{"bad digest", "envoy:\n  image:\n    digest: latest\n",
			[]string{"at '/envoy/image/digest'", "does not match pattern"}},
		{"neither protocol", "nats:\n  enabled: false\nkafka:\n  enabled: false\n",
			[]string{"enable at least one of nats.enabled and kafka.enabled"}},
		{"listeners on one port", "nats:\n  port: 9092\n",
			[]string{"nats.port and kafka.port are both 9092: each listener needs its own port"}},
		{"listener on the metrics port", "kafka:\n  port: 9102\n",
			[]string{"kafka.port 9102 collides with Envoy's admin or metrics port"}},
		{"NATS on a broker's gateway port", "nats:\n  port: 9093\n",
			[]string{"nats.port 9093 is the gateway port of kafka.brokers[0] (kafka-0.kafka-headless.kafka.svc.cluster.local:9092): broker i gets kafka.port+1+i, here 9093 to 9093"}},
		{"broker port on the metrics port", "kafka:\n  port: 9100\n  brokers: [kafka-0.kafka:9092, kafka-1.kafka:9092, kafka-2.kafka:9092]\n",
			[]string{"envoy.metricsPort 9102 is the gateway port of kafka.brokers[1] (kafka-1.kafka:9092)"}},
		{"no room for the broker ports", "kafka:\n  port: 65534\n  brokers: [kafka-0.kafka:9092, kafka-1.kafka:9092]\n",
			[]string{"kafka.port 65534 leaves no room for the 2 broker ports", "up to 65536, above 65535"}},
		{"advertised host with a port", "kafka:\n  advertisedHost: kafka.example.com:9092\n",
			[]string{"at '/kafka/advertisedHost'", "does not match pattern"}},
		{"a broker twice", "kafka:\n  brokers: [kafka-0.kafka:9092, kafka-0.kafka:9092]\n",
			[]string{"at '/kafka/brokers'", "items at 0 and 1 are equal"}},
		{"no policies at all", "policies:\n  files: null\n",
			[]string{"set policies.files or policies.existingConfigMap"}},
		{"policy objects under the default ServiceAccount", "policies:\n  source: kubernetes\nserviceAccount:\n  create: false\n",
			[]string{"policies.source=kubernetes needs serviceAccount.create"}},
		{"an unknown policy source", "policies:\n  source: crd\n",
			[]string{"at '/policies/source'", "value must be one of"}},
		{"HPA max below min", "envoy:\n  autoscaling:\n    enabled: true\n    minReplicas: 5\n    maxReplicas: 2\n",
			[]string{"envoy.autoscaling.maxReplicas is below minReplicas"}},
		{"TLS without a certificate", "tls:\n  kafka:\n    enabled: true\n",
			[]string{"tls.nats.enabled and tls.kafka.enabled need the gateway's certificate: set tls.secretName"}},
		{"mTLS without a client CA", "tls:\n  secretName: gw-tls\n  nats:\n    enabled: true\n    clientCertificates: required\n",
			[]string{"tls.nats.clientCertificates is required: set tls.clientCASecret"}},
		{"TLS to brokers without their CA", "tls:\n  upstream:\n    kafka: true\n",
			[]string{"tls.upstream.nats and tls.upstream.kafka need tls.upstream.caSecret"}},
		{"cert-manager without an issuer", "tls:\n  certManager:\n    enabled: true\n  nats:\n    enabled: true\n",
			[]string{"tls.certManager.enabled needs tls.certManager.issuerRef.name"}},
		{"TLS NATS on the plaintext port", "tls:\n  secretName: gw-tls\n  nats:\n    enabled: true\n    port: 4222\n",
			[]string{"tls.nats.port and nats.port are both 4222"}},
		{"client certificates maybe", "tls:\n  nats:\n    clientCertificates: sometimes\n",
			[]string{"at '/tls/nats/clientCertificates'", "value must be one of 'optional', 'required'"}},
	}
	var many []string
	for i := 0; i <= 100; i++ {
		many = append(many, fmt.Sprintf("kafka-%d.kafka:9092", i))
	}
	cases = append(cases, struct {
		name, values string
		want         []string
	}{"101 brokers (port names of 15 characters at most)", "kafka:\n  port: 20000\n  brokers: [" + strings.Join(many, ", ") + "]\n",
		[]string{"at '/kafka/brokers': maxItems: got 101, want 100"}})
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
			if err := os.WriteFile(f, []byte(c.values), 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := render(t, kubeVersions[i%len(kubeVersions)], []string{f})
			if code == 0 {
				t.Fatalf("accepted:\n%s", c.values)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error does not say %q:\n%s", w, stderr)
				}
			}
		})
	}
}
