package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The upstreams and client ports, as the chart documents them: NATS gets every seed URL as an
// endpoint (--nats-upstream, comma-separated); Kafka gets the bootstrap listener on kafka.port
// (--kafka-listen, forwarding to the first broker), and broker i of kafka.brokers (from 0) its
// own port kafka.port+1+i named kafka-broker-<i> — the same number on the Envoy container, the
// Service, the control plane's --kafka-broker=BROKER=0.0.0.0:PORT=ADVERTISED_HOST:PORT, and in
// the NetworkPolicy — where ADVERTISED_HOST is kafka.advertisedHost or the Envoy Service's DNS
// name. The expectations are computed from the values, not from the chart's helpers.
func TestUpstreamsAndClientPortsMatchTheValues(t *testing.T) {
	multiBroker := false
	for name, file := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			vals := chartValues(t, file)
			ms := mustRender(t, []string{file})
			cp := container(t, ms.find(t, "Deployment", "-control-plane"), "containers", "control-plane")
			envoy := container(t, ms.find(t, "Deployment", "-envoy"), "containers", "envoy")
			svc := ms.find(t, "Service", "-envoy")
			args := strings_(cp["args"])
			svcHost := fmt.Sprintf("%s.%s.svc.cluster.local", svc.name(), namespace)

			// NATS: every seed, in order.
			if get(vals, "nats", "enabled") == true {
				var seeds []string
				for _, s := range strings_(get(vals, "nats", "servers")) {
					seeds = append(seeds, strings.TrimPrefix(s, "nats://"))
				}
				if got, _ := flagValue(args, "nats-upstream"); got != strings.Join(seeds, ",") {
					t.Errorf("--nats-upstream=%s, want every seed: %s", got, strings.Join(seeds, ","))
				}
			}
			// What NATS clients are told in INFO: nats.advertise (tls.nats.advertise), or the
			// Envoy Service's DNS name with the listener's port; only for a listener that exists.
			advertise := func(listener map[string]any) string {
				if a := strings_(listener["advertise"]); len(a) > 0 {
					return strings.Join(a, ",")
				}
				return fmt.Sprintf("%s:%d", svcHost, listener["port"].(int))
			}
			for _, l := range []struct {
				flag   string
				values map[string]any
				on     bool
			}{
				{"nats-advertise", get(vals, "nats").(map[string]any), get(vals, "nats", "enabled") == true},
				{"nats-tls-advertise", get(vals, "tls", "nats").(map[string]any), get(vals, "nats", "enabled") == true && get(vals, "tls", "nats", "enabled") == true},
			} {
				got := flagValues(args, l.flag)
				switch {
				case !l.on && len(got) != 0:
					t.Errorf("--%s=%q for a listener that is off", l.flag, got)
				case l.on && (len(got) != 1 || got[0] != advertise(l.values)):
					t.Errorf("--%s=%q, want %s", l.flag, got, advertise(l.values))
				}
			}

			// Kafka: the bootstrap listener and one listener per broker.
			brokerFlags := flagValues(args, "kafka-broker")
			wantPorts := map[string]int{} // client port name -> number, on the container and the Service
			if get(vals, "nats", "enabled") == true {
				wantPorts["nats"] = get(vals, "nats", "port").(int)
				if get(vals, "tls", "nats", "enabled") == true {
					wantPorts["nats-tls"] = get(vals, "tls", "nats", "port").(int)
					want := fmt.Sprintf("0.0.0.0:%d", wantPorts["nats-tls"])
					if get(vals, "tls", "nats", "clientCertificates") == "required" {
						want += ",mtls"
					}
					if got, _ := flagValue(args, "nats-tls-listen"); got != want {
						t.Errorf("--nats-tls-listen=%s, want %s", got, want)
					}
				}
			}
			if get(vals, "kafka", "enabled") == true && get(vals, "kafka", "cluster", "enabled") == true {
				// Discovered brokers (kafkacluster_test.go checks the --kafka-cluster flag):
				// the bootstrap port, and node n of the range at kafka.port+1+(n-first).
				kafkaPort := get(vals, "kafka", "port").(int)
				wantPorts["kafka"] = kafkaPort
				first, last := get(vals, "kafka", "cluster", "nodeIds", "first").(int), get(vals, "kafka", "cluster", "nodeIds", "last").(int)
				for n := first; n <= last; n++ {
					wantPorts[fmt.Sprintf("kafka-node-%d", n)] = kafkaPort + 1 + n - first
				}
				if len(brokerFlags) != 0 {
					t.Errorf("kafka.cluster, but --kafka-broker flags rendered: %q", brokerFlags)
				}
				if len(flagValues(args, "kafka-cluster")) != 1 {
					t.Errorf("kafka.cluster, but --kafka-cluster=%q", flagValues(args, "kafka-cluster"))
				}
			} else if get(vals, "kafka", "enabled") == true {
				brokers := strings_(get(vals, "kafka", "brokers"))
				kafkaPort := get(vals, "kafka", "port").(int)
				wantPorts["kafka"] = kafkaPort
				if got, _ := flagValue(args, "kafka-upstream"); got != brokers[0] {
					t.Errorf("--kafka-upstream=%s, want the first broker %s", got, brokers[0])
				}
				host, _ := get(vals, "kafka", "advertisedHost").(string)
				if host == "" {
					host = svcHost
				}
				if len(brokerFlags) != len(brokers) {
					t.Fatalf("%d --kafka-broker flags for %d brokers: %q", len(brokerFlags), len(brokers), brokerFlags)
				}
				multiBroker = multiBroker || len(brokers) > 1
				// TLS options, the same on every Kafka listener.
				options := ""
				if get(vals, "tls", "kafka", "enabled") == true {
					options = ",tls"
					if get(vals, "tls", "kafka", "clientCertificates") == "required" {
						options = ",mtls"
					}
				}
				if get(vals, "tls", "upstream", "kafka") == true {
					options += ",upstream-tls"
				}
				if got, _ := flagValue(args, "kafka-listen"); got != fmt.Sprintf("0.0.0.0:%d%s", kafkaPort, options) {
					t.Errorf("--kafka-listen=%s, want options %q", got, options)
				}
				for i, b := range brokers {
					name, port := fmt.Sprintf("kafka-broker-%d", i), kafkaPort+1+i
					wantPorts[name] = port
					want := fmt.Sprintf("%s=0.0.0.0:%d=%s:%d%s", b, port, host, port, options)
					if brokerFlags[i] != want {
						t.Errorf("--kafka-broker=%s, want %s", brokerFlags[i], want)
					}
					// The port clients are told is the Service's, which sends them to the
					// container port Envoy listens on.
					if sp := servicePort(t, svc, name); sp != port {
						t.Errorf("Service port %s is %d, clients are told %d", name, sp, port)
					}
					if cp := containerPort(t, envoy, name); cp != port {
						t.Errorf("container port %s is %d, the listener is on %d", name, cp, port)
					}
				}
			} else if len(brokerFlags) != 0 || len(flagValues(args, "kafka-cluster")) != 0 {
				t.Errorf("Kafka disabled, but --kafka-broker or --kafka-cluster flags rendered: %q", args)
			}

			// Nothing else: the container's client ports and the Service's ports are exactly
			// these, each Service port targeting the container port of its name.
			gotContainer := map[string]int{}
			for _, p := range envoy["ports"].([]any) {
				if m := p.(map[string]any); m["name"] != "metrics" {
					gotContainer[m["name"].(string)] = m["containerPort"].(int)
				}
			}
			gotService := map[string]int{}
			for _, p := range get(svc, "spec", "ports").([]any) {
				m := p.(map[string]any)
				gotService[m["name"].(string)] = m["port"].(int)
				if m["targetPort"] != m["name"] {
					t.Errorf("Service port %v targets %v", m["name"], m["targetPort"])
				}
			}
			if fmt.Sprint(gotContainer) != fmt.Sprint(wantPorts) || fmt.Sprint(gotService) != fmt.Sprint(wantPorts) {
				t.Errorf("client ports: container %v, Service %v, want %v", gotContainer, gotService, wantPorts)
			}
			for name := range wantPorts {
				if len(name) > 15 {
					t.Errorf("port name %q is longer than the 15 characters Kubernetes allows", name)
				}
			}

			// The NetworkPolicy admits clients on every client port.
			for _, o := range ms {
				if o.kind() != "NetworkPolicy" || !strings.HasSuffix(o.name(), "-envoy") {
					continue
				}
				admitted := map[string]bool{}
				for _, p := range get(o, "spec", "ingress", 0, "ports").([]any) {
					admitted[fmt.Sprint(p.(map[string]any)["port"])] = true
				}
				for name := range wantPorts {
					if !admitted[name] {
						t.Errorf("the Envoy NetworkPolicy does not admit clients on port %s", name)
					}
				}
			}
		})
	}
	if !multiBroker {
		t.Error("no value set has several Kafka brokers")
	}
}

// The control plane binary accepts the arguments the chart renders, for every value set: it
// starts, builds its xDS resources (listeners, clusters and broker routes: an address it cannot
// use keeps it unready) and reports ready. Only the policy directory, the module path and the
// listen addresses are substituted (and policy objects by the policy directory).
func TestControlPlaneAcceptsTheRenderedArguments(t *testing.T) {
	if _, err := os.Stat(wasmFile); err != nil {
		t.Fatalf("the filter module is not built (make wasm): %v", err)
	}
	defaultPolicies := writePolicies(t, mustRender(t, nil).find(t, "ConfigMap", "-policies"))
	for name, file := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			ms := mustRender(t, []string{file})
			cp := container(t, ms.find(t, "Deployment", "-control-plane"), "containers", "control-plane")
			policies := defaultPolicies
			for _, o := range ms {
				if o.kind() == "ConfigMap" && strings.HasSuffix(o.name(), "-policies") {
					policies = writePolicies(t, o)
				}
			}
			ports := freePorts(t, 2)
			args := strings_(cp["args"])
			if args[0] != "serve" {
				t.Fatalf("the control plane runs %v, not `weighstation serve`", args)
			}
			if source, _ := flagValue(args, "policy-source"); source == "kubernetes" {
				// Policy objects need an API server: that source runs against a real one in
				// make test-integration (control-plane/e2e/kubernetes_test.go), under the
				// RBAC this chart renders. Here the other arguments are checked.
				args = setFlag(args, "policy-source", "files")
			}
			args = setFlag(args, "policy-dir", policies)
			args = setFlag(args, "xds-listen", fmt.Sprintf("127.0.0.1:%d", ports[0]))
			args = setFlag(args, "http-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]))
			args = setFlag(args, "serve-wasm", wasmFile)
			args = withTLSFiles(t, args)
			log := filepath.Join(t.TempDir(), "control-plane.log")
			t.Cleanup(func() {
				if t.Failed() {
					b, _ := os.ReadFile(log)
					t.Logf("weighstation %s\n%s", strings.Join(args, " "), tail(string(b), 3000))
				}
			})
			p := start(t, log, weighBin, args...)
			p.waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1]), 200, 10*time.Second)
		})
	}
	// And the binary does refuse a malformed --kafka-broker: a rendering that drifted from its
	// syntax fails above.
	if _, stderr, code := run(t, nil, weighBin, "serve", "--kafka-broker=kafka-0:9092=0.0.0.0:9093=gw:9093=x"); code != 2 || !strings.Contains(stderr, "UPSTREAM=LISTEN[=ADVERTISE]") {
		t.Errorf("serve accepted a malformed --kafka-broker: exit %d\n%s", code, stderr)
	}
}

// The release notes tell each broker's gateway address, the one the control plane advertises.
// Helm does not render NOTES.txt in `helm template`, so the test renders it from a copy of the
// chart in which a ConfigMap carries it.
func TestNotesTellTheAdvertisedBrokerAddresses(t *testing.T) {
	for _, name := range []string{"default", "kafka-3-brokers"} {
		t.Run(name, func(t *testing.T) {
			file := valueSets(t)[name]
			cp := container(t, mustRender(t, []string{file}).find(t, "Deployment", "-control-plane"), "containers", "control-plane")
			notes := renderNotes(t, file)
			brokers := flagValues(strings_(cp["args"]), "kafka-broker")
			if len(brokers) == 0 {
				t.Fatal("no --kafka-broker rendered")
			}
			for _, b := range brokers {
				parts := strings.Split(b, "=")
				line := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(parts[0]) + `\s+is advertised as\s+` + regexp.QuoteMeta(parts[2]) + `$`)
				if !line.MatchString(notes) {
					t.Errorf("NOTES do not say %s is advertised as %s:\n%s", parts[0], parts[2], notes)
				}
			}
			external := get(chartValues(t, file), "envoy", "service", "type") != "ClusterIP"
			advertised, _ := get(chartValues(t, file), "kafka", "advertisedHost").(string)
			if warns := strings.Contains(notes, "kafka.advertisedHost is not set"); warns != (external && advertised == "") {
				t.Errorf("warning about kafka.advertisedHost: %v, want %v (Service %v, advertisedHost %q)", warns, external && advertised == "", get(chartValues(t, file), "envoy", "service", "type"), advertised)
			}
		})
	}
	notes := renderNotes(t, valueSets(t)["kafka-3-brokers"], "kafka.advertisedHost=")
	if !strings.Contains(notes, "kafka.advertisedHost is not set") {
		t.Errorf("a LoadBalancer without kafka.advertisedHost gets no warning:\n%s", notes)
	}
}

func renderNotes(t *testing.T, file string, sets ...string) string {
	t.Helper()
	chart := filepath.Join(t.TempDir(), "weighstation")
	if out, stderr, code := run(t, nil, "cp", "-r", chartDir, chart); code != 0 {
		t.Fatalf("cp: %s%s", out, stderr)
	}
	notes := readFile(t, filepath.Join(chart, "templates", "NOTES.txt"))
	writeFile(t, filepath.Join(chart, "templates", "_notes_test.tpl"), `{{- define "test.notes" -}}`+notes+`{{- end -}}`)
	writeFile(t, filepath.Join(chart, "templates", "notes_test.yaml"),
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: {{ include \"test.notes\" . | toJson }}\n")
	args := []string{"template", "ws", chart, "--namespace", namespace, "-f", file, "--show-only", "templates/notes_test.yaml"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, stderr, code := run(t, nil, helmBin, args...)
	if code != 0 {
		t.Fatalf("helm template (NOTES): exit %d: %s", code, stderr)
	}
	s, _ := get(parseManifests(t, out)[0], "data", "notes").(string)
	return s
}

// Kafka clients come back through the gateway to every broker. Three stand-in brokers (a few
// lines of the Kafka protocol: Metadata and FindCoordinator v1, each advertising its own
// address like the brokers of an existing cluster) run on this machine; the chart's 3-broker
// value set is rendered with their addresses, and both pods run as rendered against them. A
// client bootstrapping at the gateway must learn every broker at advertisedHost and its gateway
// port, and each of those ports must lead to its broker.
func TestKafkaClientsComeBackThroughTheGateway(t *testing.T) {
	brokers := startFakeBrokers(t, 3)
	file := valueSets(t)["kafka-3-brokers"]
	host := get(chartValues(t, file), "kafka", "advertisedHost").(string)
	p := startChartPods(t, []string{file}, freePodPorts(t, len(brokers)),
		"kafka.brokers={"+strings.Join(brokers, ",")+"}")
	p.checkEnvoyListeners(t)

	// Bootstrap: the gateway forwards to the first broker, and rewrites every address.
	controller, addrs := kafkaMetadata(t, fmt.Sprintf("127.0.0.1:%d", p.ports.kafka))
	if controller != 0 {
		t.Errorf("the bootstrap port reached broker %d, want the first", controller)
	}
	for i := range brokers {
		want := fmt.Sprintf("%s:%d", host, p.ports.kafka+1+i)
		if addrs[int32(i)] != want {
			t.Errorf("broker %d (%s) advertised at %s, want the gateway's %s", i, brokers[i], addrs[int32(i)], want)
		}
	}
	// Every advertised port leads to its broker (127.0.0.1 standing in for advertisedHost), and
	// answers with gateway addresses again; FindCoordinator is rewritten as well.
	for i := range brokers {
		port := strings.TrimPrefix(addrs[int32(i)], host+":")
		controller, again := kafkaMetadata(t, "127.0.0.1:"+port)
		if controller != int32(i) {
			t.Errorf("advertised port %s reached broker %d, want %d", port, controller, i)
		}
		if fmt.Sprint(again) != fmt.Sprint(addrs) {
			t.Errorf("through port %s: brokers %v, want %v", port, again, addrs)
		}
	}
	if coord := kafkaFindCoordinator(t, fmt.Sprintf("127.0.0.1:%d", p.ports.kafka)); coord != fmt.Sprintf("%s:%d", host, p.ports.kafka+3) {
		t.Errorf("coordinator at %s, want the third broker's gateway address %s:%d", coord, host, p.ports.kafka+3)
	}
}

// chartValues returns the chart's values.yaml merged with a values file as Helm merges them
// (maps key by key, everything else replaced).
func chartValues(t *testing.T, file string) map[string]any {
	t.Helper()
	var base, over map[string]any
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(chartDir, "values.yaml"))), &base); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(readFile(t, file)), &over); err != nil {
		t.Fatal(err)
	}
	return mergeValues(base, over)
}

func mergeValues(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		b, bok := out[k].(map[string]any)
		o, ook := v.(map[string]any)
		if bok && ook {
			out[k] = mergeValues(b, o)
		} else {
			out[k] = v
		}
	}
	return out
}

// flagValues returns every value of a repeated --name=value in args, in order.
func flagValues(args []string, name string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
