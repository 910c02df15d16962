package charttest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// In front of a Kafka cluster the gateway discovers (kafka.cluster, values/kafka-cluster.yaml):
// no list of brokers. The control plane gets one --kafka-cluster flag,
// kafka=0.0.0.0:<port+1>,nodes=<first>-<last>,listen=0.0.0.0:<port>,bootstrap=<a+b…>,
// advertise=<host>:<port+1> and the listener options, with no plain bootstrap listener
// (--kafka-listen empty) and no --kafka-broker; node n of the range has the container and Service
// port kafka-node-<n>, kafka.port+1+(n-first), and the bootstrap port stays kafka. The expected
// flags are written out, not computed with the chart's helpers.
func TestKafkaClusterFlagAndPorts(t *testing.T) {
	file := valueSets(t)["kafka-cluster"]
	const svcHost = "ws-weighstation-envoy." + namespace + ".svc.cluster.local"
	const bootstrap = "events-kafka-bootstrap.kafka.svc.cluster.local:9092"
	tlsOn := []string{"tls.secretName=gw-tls", "tls.kafka.enabled=true"}
	cases := []struct {
		name          string
		noValueSet    bool   // from the chart's defaults, not values/kafka-cluster.yaml
		values        string // YAML over them
		sets          []string
		want          string // the --kafka-cluster value, exactly
		port          int
		first, last   int
		natsToo       bool
		networkPolicy bool
	}{
		{name: "the value set", port: 9092, first: 0, last: 15, networkPolicy: true,
			want: "kafka=0.0.0.0:9093,nodes=0-15,listen=0.0.0.0:9092,bootstrap=" + bootstrap + ",advertise=kafka-gateway.example.com:9093"},
		{name: "advertised at the Service's DNS name", sets: []string{"kafka.advertisedHost="}, port: 9092, first: 0, last: 15, networkPolicy: true,
			want: "kafka=0.0.0.0:9093,nodes=0-15,listen=0.0.0.0:9092,bootstrap=" + bootstrap + ",advertise=" + svcHost + ":9093"},
		{name: "several bootstrap brokers", port: 9092, first: 0, last: 15, networkPolicy: true,
			values: "kafka:\n  cluster:\n    bootstrap: \"events-kafka-0.events-kafka-brokers.kafka.svc:9092, events-kafka-1.events-kafka-brokers.kafka.svc:9092,events-kafka-2.events-kafka-brokers.kafka.svc:9092\"\n",
			want:   "kafka=0.0.0.0:9093,nodes=0-15,listen=0.0.0.0:9092,bootstrap=events-kafka-0.events-kafka-brokers.kafka.svc:9092+events-kafka-1.events-kafka-brokers.kafka.svc:9092+events-kafka-2.events-kafka-brokers.kafka.svc:9092,advertise=kafka-gateway.example.com:9093"},
		{name: "node ids 100 to 103 on port 19092", sets: []string{"kafka.port=19092", "kafka.cluster.nodeIds.first=100", "kafka.cluster.nodeIds.last=103"},
			port: 19092, first: 100, last: 103, networkPolicy: true,
			want: "kafka=0.0.0.0:19093,nodes=100-103,listen=0.0.0.0:19092,bootstrap=" + bootstrap + ",advertise=kafka-gateway.example.com:19093"},
		{name: "one node id", sets: []string{"kafka.cluster.nodeIds.first=7", "kafka.cluster.nodeIds.last=7"}, port: 9092, first: 7, last: 7, networkPolicy: true,
			want: "kafka=0.0.0.0:9093,nodes=7-7,listen=0.0.0.0:9092,bootstrap=" + bootstrap + ",advertise=kafka-gateway.example.com:9093"},
		{name: "TLS to clients and to the brokers", sets: append([]string{"tls.upstream.kafka=true", "tls.upstream.caSecret=brokers-ca"}, tlsOn...),
			port: 9092, first: 0, last: 15, networkPolicy: true,
			want: "kafka=0.0.0.0:9093,nodes=0-15,listen=0.0.0.0:9092,bootstrap=" + bootstrap + ",advertise=kafka-gateway.example.com:9093,tls,upstream-tls"},
		{name: "mTLS", sets: append([]string{"tls.kafka.clientCertificates=required", "tls.clientCASecret=clients-ca"}, tlsOn...),
			port: 9092, first: 0, last: 15, networkPolicy: true,
			want: "kafka=0.0.0.0:9093,nodes=0-15,listen=0.0.0.0:9092,bootstrap=" + bootstrap + ",advertise=kafka-gateway.example.com:9093,mtls"},
		{name: "beside NATS", sets: []string{"nats.enabled=true"}, port: 9092, first: 0, last: 15, natsToo: true, networkPolicy: true,
			want: "kafka=0.0.0.0:9093,nodes=0-15,listen=0.0.0.0:9092,bootstrap=" + bootstrap + ",advertise=kafka-gateway.example.com:9093"},
		// The chart's defaults with only the cluster turned on: node ids 0 to 8 fit below
		// envoy.metricsPort (9102).
		{name: "from the defaults", noValueSet: true, port: 9092, first: 0, last: 8, natsToo: true,
			values: "kafka:\n  brokers: []\n  cluster:\n    enabled: true\n    bootstrap: kafka-bootstrap.kafka.svc.cluster.local:9092\n",
			want:   "kafka=0.0.0.0:9093,nodes=0-8,listen=0.0.0.0:9092,bootstrap=kafka-bootstrap.kafka.svc.cluster.local:9092,advertise=" + svcHost + ":9093"},
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var files []string
			if !c.noValueSet {
				files = append(files, file)
			}
			if c.values != "" {
				f := filepath.Join(dir, fmt.Sprintf("case-%d.yaml", i))
				writeFile(t, f, c.values)
				files = append(files, f)
			}
			ms := mustRender(t, files, c.sets...)
			args := strings_(container(t, ms.find(t, "Deployment", "-control-plane"), "containers", "control-plane")["args"])
			if got := flagValues(args, "kafka-cluster"); len(got) != 1 || got[0] != c.want {
				t.Errorf("--kafka-cluster=%q\nwant            %s", got, c.want)
			}
			kc := parseKafkaCluster(t, flagValues(args, "kafka-cluster")[0])
			if kc.first != c.first || kc.last != c.last || kc.options["bootstrap"] == "" {
				t.Errorf("--kafka-cluster parses as %+v", kc)
			}
			if got := flagValues(args, "kafka-listen"); len(got) != 1 || got[0] != "" {
				t.Errorf("--kafka-listen=%q, want one, empty: no plain bootstrap listener beside the cluster's", got)
			}
			for _, f := range []string{"kafka-broker", "kafka-upstream"} {
				if got := flagValues(args, f); len(got) != 0 {
					t.Errorf("--%s=%q beside --kafka-cluster", f, got)
				}
			}
			// The filters report the brokers they see with their usage reports: without them
			// serve refuses --kafka-cluster.
			if got, _ := flagValue(args, "report-address"); got == "" || got == "off" {
				t.Errorf("--report-address=%q: the control plane would learn no broker", got)
			}

			want := map[string]int{"kafka": c.port}
			for n := c.first; n <= c.last; n++ {
				want[fmt.Sprintf("kafka-node-%d", n)] = c.port + 1 + n - c.first
			}
			envoy := container(t, ms.find(t, "Deployment", "-envoy"), "containers", "envoy")
			svc := ms.find(t, "Service", "-envoy")
			gotContainer, gotService := map[string]int{}, map[string]int{}
			for _, p := range envoy["ports"].([]any) {
				m := p.(map[string]any)
				if name := m["name"].(string); strings.HasPrefix(name, "kafka") {
					gotContainer[name] = m["containerPort"].(int)
				}
			}
			for _, p := range get(svc, "spec", "ports").([]any) {
				m := p.(map[string]any)
				if name := m["name"].(string); strings.HasPrefix(name, "kafka") {
					gotService[name] = m["port"].(int)
					if m["targetPort"] != name {
						t.Errorf("Service port %s targets %v", name, m["targetPort"])
					}
				}
			}
			if fmt.Sprint(gotContainer) != fmt.Sprint(want) {
				t.Errorf("Envoy's Kafka container ports %v, want %v", gotContainer, want)
			}
			if fmt.Sprint(gotService) != fmt.Sprint(want) {
				t.Errorf("the Service's Kafka ports %v, want %v", gotService, want)
			}
			if hasContainerPort(envoy, "nats") != c.natsToo {
				t.Errorf("NATS port on Envoy: %v, want %v", hasContainerPort(envoy, "nats"), c.natsToo)
			}
			if !c.networkPolicy {
				return
			}
			np := ms.find(t, "NetworkPolicy", "-envoy")
			admitted := map[string]bool{}
			for _, p := range get(np, "spec", "ingress", 0, "ports").([]any) {
				admitted[fmt.Sprint(p.(map[string]any)["port"])] = true
			}
			for name := range want {
				if !admitted[name] {
					t.Errorf("the Envoy NetworkPolicy does not admit clients on port %s", name)
				}
			}
		})
	}
}

// Values the cluster mode cannot work with are refused while rendering, naming the value: both
// kafka.brokers and kafka.cluster; no bootstrap; a node id range upside down, too wide, past
// port 65535, or over another port of the gateway; and what the schema says of the new keys.
func TestKafkaClusterBadValuesAreRejected(t *testing.T) {
	file := valueSets(t)["kafka-cluster"]
	cases := []struct {
		name       string
		noValueSet bool
		values     string
		want       []string
	}{
		{"kafka.brokers too", false, "kafka:\n  brokers: [kafka-0.kafka:9092]\n",
			[]string{"kafka.cluster.enabled and kafka.brokers are exclusive", "set kafka.brokers: []"}},
		{"the default kafka.brokers too", true, "kafka:\n  cluster:\n    enabled: true\n    bootstrap: kafka-bootstrap.kafka:9092\n",
			[]string{"kafka.cluster.enabled and kafka.brokers are exclusive", "(its default lists one broker)"}},
		{"no bootstrap", false, "kafka:\n  cluster:\n    bootstrap: \"\"\n",
			[]string{"kafka.cluster.enabled needs kafka.cluster.bootstrap"}},
		{"first above last", false, "kafka:\n  cluster:\n    nodeIds: {first: 5, last: 3}\n",
			[]string{"kafka.cluster.nodeIds.first 5 is above kafka.cluster.nodeIds.last 3"}},
		{"1025 node ids", false, "kafka:\n  port: 20000\n  cluster:\n    nodeIds: {first: 1000, last: 2024}\n",
			[]string{"kafka.cluster.nodeIds.first 1000 to kafka.cluster.nodeIds.last 2024 is 1025 node ids, at most 1024"}},
		{"node ports past 65535", false, "kafka:\n  port: 65000\n  cluster:\n    nodeIds: {first: 0, last: 999}\n",
			[]string{"kafka.port 65000 leaves no room for the 1000 node ports of kafka.cluster.nodeIds.first 0 to kafka.cluster.nodeIds.last 999", "up to 66000, above 65535"}},
		{"node ports over the default metrics port", false, "envoy:\n  metricsPort: 9102\n",
			[]string{"envoy.metricsPort 9102 is the gateway port of node id 9 (kafka.cluster.nodeIds.first 0 to kafka.cluster.nodeIds.last 15)", "here 9093 to 9108", "narrow kafka.cluster.nodeIds"}},
		{"node ports over the admin port", false, "kafka:\n  port: 9890\n  cluster:\n    nodeIds: {first: 100, last: 115}\n",
			[]string{"envoy.adminPort 9901 is the gateway port of node id 110 (kafka.cluster.nodeIds.first 100 to kafka.cluster.nodeIds.last 115)"}},
		{"node ports over nats.port", false, "nats:\n  enabled: true\n  port: 9095\n",
			[]string{"nats.port 9095 is the gateway port of node id 2"}},
		{"node ports over tls.nats.port", false, "nats:\n  enabled: true\ntls:\n  secretName: gw-tls\n  nats:\n    enabled: true\n    port: 9100\n",
			[]string{"tls.nats.port 9100 is the gateway port of node id 7"}},
		{"a node id above 9999", false, "kafka:\n  cluster:\n    nodeIds: {first: 9990, last: 10000}\n",
			[]string{"at '/kafka/cluster/nodeIds/last': maximum: got 10,000, want 9,999"}},
		{"a negative node id", false, "kafka:\n  cluster:\n    nodeIds: {first: -1, last: 3}\n",
			[]string{"at '/kafka/cluster/nodeIds/first': minimum: got -1, want 0"}},
		{"bootstrap without a port", false, "kafka:\n  cluster:\n    bootstrap: events-kafka-bootstrap.kafka\n",
			[]string{"at '/kafka/cluster/bootstrap'", "does not match pattern"}},
		{"bootstrap as a list", false, "kafka:\n  cluster:\n    bootstrap: [events-kafka-bootstrap.kafka:9092]\n",
			[]string{"at '/kafka/cluster/bootstrap': got array, want string"}},
		{"an unknown key", false, "kafka:\n  cluster:\n    nodes: 0-15\n",
			[]string{"at '/kafka/cluster': additional properties 'nodes' not allowed"}},
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(dir, fmt.Sprintf("case-%d.yaml", i))
			writeFile(t, f, c.values)
			files := []string{file, f}
			if c.noValueSet {
				files = []string{f}
			}
			_, stderr, code := render(t, kubeVersions[i%len(kubeVersions)], files)
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
	// And kafka.cluster off with no brokers is refused too (there is nothing to front).
	f := filepath.Join(dir, "off.yaml")
	writeFile(t, f, "kafka:\n  cluster:\n    enabled: false\n")
	if _, stderr, code := render(t, kubeVersions[0], []string{file, f}); code == 0 || !strings.Contains(stderr, "kafka.brokers is empty") {
		t.Errorf("kafka.cluster off and kafka.brokers empty: exit %d\n%s", code, stderr)
	}
}

// networkPolicy.brokers with discovered brokers: the policy selects the broker pods by the
// labels of networkPolicy.brokers.podSelector, not by a list, so every broker of the cluster —
// node ids outside the gateway's range and brokers that join later included — is selected;
// their client port admits this release's Envoy pods and no one else (not the control plane,
// which reaches no broker: it learns them from the filters' reports), and the brokers reach
// each other on every port.
func TestKafkaClusterBrokersNetworkPolicy(t *testing.T) {
	ms := mustRender(t, []string{valueSets(t)["kafka-cluster"]})
	np := ms.find(t, "NetworkPolicy", "-brokers")
	if ns := get(np, "metadata", "namespace"); ns != "kafka" {
		t.Errorf("the policy is in namespace %v, want the brokers' (kafka)", ns)
	}
	selector := get(np, "spec", "podSelector").(map[string]any)
	if fmt.Sprint(selector) != fmt.Sprint(map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "kafka", "strimzi.io/cluster": "events", "strimzi.io/broker-role": "true"}}) {
		t.Errorf("podSelector %v, want networkPolicy.brokers.podSelector", selector)
	}
	type pod struct {
		name, namespace string
		labels          map[string]any
	}
	broker := func(node int) pod {
		return pod{fmt.Sprintf("events-brokers-%d", node), "kafka", map[string]any{"app.kubernetes.io/name": "kafka", "app.kubernetes.io/instance": "events",
			"strimzi.io/cluster": "events", "strimzi.io/broker-role": "true", "strimzi.io/kind": "Kafka", "strimzi.io/pool-name": "brokers", "strimzi.io/pod-name": fmt.Sprintf("events-brokers-%d", node)}}
	}
	// Node ids 0-2 at install, 3 and 15 joined later, 40 outside the gateway's range.
	var brokers []pod
	for _, n := range []int{0, 1, 2, 3, 15, 40} {
		brokers = append(brokers, broker(n))
	}
	envoyLabels := get(ms.find(t, "Deployment", "-envoy"), "spec", "template", "metadata", "labels").(map[string]any)
	cpLabels := get(ms.find(t, "Deployment", "-control-plane"), "spec", "template", "metadata", "labels").(map[string]any)
	envoy := pod{"envoy", namespace, envoyLabels}
	others := []pod{
		{"the control plane", namespace, cpLabels},
		{"envoy labels in another namespace", "elsewhere", envoyLabels},
		{"client", "apps", map[string]any{"app": "orders"}},
		{"client in the brokers' namespace", "kafka", map[string]any{"app": "kafka-ui"}},
		{"a broker of another cluster", "kafka", map[string]any{"app.kubernetes.io/name": "kafka", "strimzi.io/cluster": "audit", "strimzi.io/broker-role": "true"}},
		{"a controller of the cluster", "kafka", map[string]any{"app.kubernetes.io/name": "kafka", "strimzi.io/cluster": "events", "strimzi.io/controller-role": "true"}},
	}
	for _, b := range brokers {
		if !matchLabelSelector(t, selector, b.labels) {
			t.Errorf("the policy does not select broker %s", b.name)
		}
	}
	for _, p := range others[len(others)-2:] {
		if matchLabelSelector(t, selector, p.labels) {
			t.Errorf("the policy selects %s", p.name)
		}
	}
	rules, _ := get(np, "spec", "ingress").([]any)
	admitted := func(p pod, port int) bool {
		for _, r := range rules {
			ports, hasPorts := get(r, "ports").([]any)
			portOK := !hasPorts
			for _, pp := range ports {
				portOK = portOK || (get(pp, "port") == port && get(pp, "protocol") == "TCP")
			}
			if !portOK {
				continue
			}
			for _, peer := range get(r, "from").([]any) {
				if peerMatches(t, peer.(map[string]any), "kafka", p.namespace, p.labels) {
					return true
				}
			}
		}
		return false
	}
	if !admitted(envoy, 9092) {
		t.Error("this release's Envoy pods may not reach the brokers' client port")
	}
	if admitted(envoy, 9091) {
		t.Error("the Envoy pods may reach the brokers on a port other than networkPolicy.brokers.ports")
	}
	for _, p := range others {
		if admitted(p, 9092) {
			t.Errorf("%s may reach the brokers' client port around the gateway", p.name)
		}
	}
	for _, b := range brokers {
		for _, port := range []int{9090, 9091, 9092} {
			if !admitted(b, port) {
				t.Errorf("broker %s may not reach the others on port %d", b.name, port)
			}
		}
	}
}

// The objects of the cluster mode validate strictly for the oldest and newest Kubernetes,
// including the widest range (1024 node ids: 1025 ports on the container and the Service) and
// with TLS on both sides.
func TestKafkaClusterObjectsValidateStrictly(t *testing.T) {
	file := valueSets(t)["kafka-cluster"]
	for name, sets := range map[string][]string{
		"the value set": nil,
		"1024 node ids": {"kafka.port=20000", "kafka.cluster.nodeIds.first=0", "kafka.cluster.nodeIds.last=1023"},
		"TLS":           {"tls.secretName=gw-tls", "tls.kafka.enabled=true", "tls.kafka.clientCertificates=required", "tls.clientCASecret=clients-ca", "tls.upstream.kafka=true", "tls.upstream.caSecret=brokers-ca"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, kv := range kubeVersions {
				out, stderr, code := render(t, kv, []string{file}, sets...)
				if code != 0 {
					t.Fatalf("helm template (Kubernetes %s): exit %d: %s", kv, code, stderr)
				}
				docs := parseManifests(t, out)
				res, stderr, code := run(t, strings.NewReader(out), kubeconform, append(kubeconformArgs(kv), "-")...)
				if code != 0 {
					t.Fatalf("kubeconform (Kubernetes %s): exit %d\n%s%s", kv, code, res, stderr)
				}
				m := summaryRE.FindStringSubmatch(res)
				if m == nil || m[1] != fmt.Sprint(len(docs)) || m[2] != fmt.Sprint(len(docs)) {
					t.Errorf("Kubernetes %s: %d objects rendered; kubeconform: %s", kv, len(docs), res)
				}
			}
		})
	}
}

// The release notes say where clients bootstrap, the range of node ids fronted and the
// addresses they are told, that a broker outside the range is withheld, and which ports must
// be reachable at kafka.advertisedHost.
func TestKafkaClusterNotes(t *testing.T) {
	file := valueSets(t)["kafka-cluster"]
	notes := strings.Join(strings.Fields(renderNotes(t, file)), " ")
	for _, want := range []string{
		"Kafka bootstrap servers ws-weighstation-envoy." + namespace + ".svc.cluster.local:9092 -> events-kafka-bootstrap.kafka.svc.cluster.local:9092",
		"node id n of 0-15 is advertised as kafka-gateway.example.com:<9093 + n - 0> (kafka-gateway.example.com:9093 to kafka-gateway.example.com:9108), once discovered",
		"one outside it is withheld from clients",
		"kafka-gateway.example.com must resolve to this gateway for every Kafka client, with ports 9092-9108 reachable there",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES do not say %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "is advertised as kafka-gateway.example.com:9093 ") || strings.Contains(notes, "<no value>") {
		t.Errorf("NOTES list brokers or miss a value:\n%s", notes)
	}
	notes = renderNotes(t, file, "kafka.advertisedHost=")
	if !strings.Contains(notes, "kafka.advertisedHost is not set") {
		t.Errorf("a LoadBalancer without kafka.advertisedHost gets no warning:\n%s", notes)
	}
}

// Kafka clients come back through the gateway to every broker it discovered. Three stand-in
// brokers (node ids 0-2, each advertising its own address) run on this machine; the value set
// is rendered with them as kafka.cluster.bootstrap, and both pods run as rendered. Envoy has a
// listener on every port of the range from the start; a client bootstrapping at the gateway
// first learns no broker it cannot reach, then — once the filter has reported the brokers it
// saw and the control plane has given each an upstream — every broker at advertisedHost and
// kafka.port+1+node id, and each of those ports leads to its broker. Node ids 3-15 have a
// listener but are never handed out.
func TestKafkaClusterClientsComeBackThroughTheGateway(t *testing.T) {
	brokers := startFakeBrokers(t, 3)
	file := valueSets(t)["kafka-cluster"]
	vals := chartValues(t, file)
	host := get(vals, "kafka", "advertisedHost").(string)
	first, last := get(vals, "kafka", "cluster", "nodeIds", "first").(int), get(vals, "kafka", "cluster", "nodeIds", "last").(int)
	p := startChartPods(t, []string{file}, freePodPorts(t, last-first+1),
		"kafka.cluster.bootstrap="+strings.Join(brokers, `\,`))
	args := strings_(p.cp["args"])
	if kc := parseKafkaCluster(t, flagValues(args, "kafka-cluster")[0]); kc.options["bootstrap"] != strings.Join(brokers, "+") {
		t.Errorf("--kafka-cluster bootstrap=%s, want the stand-in brokers %s", kc.options["bootstrap"], strings.Join(brokers, "+"))
	}
	p.checkEnvoyListeners(t)

	bootstrap := fmt.Sprintf("127.0.0.1:%d", p.ports.kafka)
	want := map[int32]string{}
	for n := range brokers {
		want[int32(n)] = fmt.Sprintf("%s:%d", host, p.ports.kafka+1+n-first)
	}
	// Until then a request may also find the bootstrap upstream not yet healthy: retried.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		_, addrs, err := tryKafkaMetadata(bootstrap)
		for n, a := range addrs {
			if a != want[n] {
				t.Fatalf("the bootstrap port handed out node %d at %s, want none or the gateway's %s", n, a, want[n])
			}
		}
		if err == nil && len(addrs) == len(brokers) {
			break
		}
		if time.Now().After(deadline) {
			_, status := httpGet(t, p.cpURL+"/status")
			t.Fatalf("after 30s the gateway hands out %v (%v), want every broker %v; /status: %s", addrs, err, want, status)
		}
	}
	for n := range brokers {
		port := strings.TrimPrefix(want[int32(n)], host+":")
		controller, again := kafkaMetadata(t, "127.0.0.1:"+port)
		if controller != int32(n) {
			t.Errorf("advertised port %s reached broker %d, want %d", port, controller, n)
		}
		if fmt.Sprint(again) != fmt.Sprint(want) {
			t.Errorf("through port %s: brokers %v, want %v", port, again, want)
		}
	}
	if coord := kafkaFindCoordinator(t, bootstrap); coord != want[int32(len(brokers)-1)] {
		t.Errorf("coordinator at %s, want the last broker's gateway address %s", coord, want[int32(len(brokers)-1)])
	}
	// The control plane's metrics name every broker fronted, by node id and address.
	code, metrics := httpGet(t, p.cpURL+"/metrics")
	for n, b := range brokers {
		line := regexp.MustCompile(fmt.Sprintf(`(?m)^weighstation_controlplane_kafka_broker_fronted\{chain="weighstation-kafka-kafka",node="%d",address="%s",state="[a-z]+"\} 1$`, n, regexp.QuoteMeta(b)))
		if code != 200 || !line.Match(metrics) {
			t.Errorf("/metrics (%d) does not count node %d (%s) fronted:\n%s", code, n, b, metrics)
		}
	}
}

// kafkaClusterFlag is one --kafka-cluster value taken apart:
// NAME=BROKERS,nodes=FIRST-LAST,listen=…,bootstrap=…[,advertise=…][,tls|,mtls][,upstream-tls].
type kafkaClusterFlag struct {
	name, brokers string
	first, last   int
	options       map[string]string // key=value options
	bare          []string          // tls, mtls, upstream-tls
}

func parseKafkaCluster(t *testing.T, v string) kafkaClusterFlag {
	t.Helper()
	parts := strings.Split(v, ",")
	name, brokers, ok := strings.Cut(parts[0], "=")
	if !ok {
		t.Fatalf("--kafka-cluster=%s: no NAME=BROKERS", v)
	}
	kc := kafkaClusterFlag{name: name, brokers: brokers, options: map[string]string{}}
	for _, o := range parts[1:] {
		if k, val, ok := strings.Cut(o, "="); ok {
			if _, dup := kc.options[k]; dup {
				t.Errorf("--kafka-cluster=%s: %s= twice", v, k)
			}
			kc.options[k] = val
		} else {
			kc.bare = append(kc.bare, o)
		}
	}
	m := regexp.MustCompile(`^(\d+)-(\d+)$`).FindStringSubmatch(kc.options["nodes"])
	if m == nil {
		t.Fatalf("--kafka-cluster=%s: nodes=%q is not FIRST-LAST", v, kc.options["nodes"])
	}
	kc.first, _ = strconv.Atoi(m[1])
	kc.last, _ = strconv.Atoi(m[2])
	return kc
}
