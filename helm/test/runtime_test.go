package charttest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The two pods of the chart, run as rendered on this machine: the control plane with the
// Deployment's arguments, and Envoy 1.40 with the bootstrap its init container writes. Only
// what a pod has and a test machine has not is substituted: 127.0.0.1 for the control plane
// Service's DNS name, temporary paths for the volumes, free ports. Then the listeners, the
// probes, the drain hook and the metrics listener are exercised against the real processes.
func TestChartPodsRunWithRealEnvoy(t *testing.T) {
	p := startChartPods(t, nil, freePodPorts(t, 1))
	for _, port := range []int{p.ports.nats, p.ports.kafka, p.ports.kafka + 1} {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second); err != nil {
			t.Errorf("client listener %d: %v", port, err)
		} else {
			c.Close()
		}
	}
	p.checkEnvoyListeners(t)
	var status struct {
		Active struct{ Version string } `json:"active"`
		Nodes  []struct {
			ID           string `json:"id"`
			AckedVersion string `json:"ackedVersion"`
		} `json:"nodes"`
	}
	_, body := httpGet(t, p.cpURL+"/status")
	if err := json.Unmarshal(body, &status); err != nil || len(status.Nodes) != 1 || status.Nodes[0].AckedVersion != status.Active.Version || status.Active.Version == "" {
		t.Errorf("/status after Envoy is ready: %s", body)
	} else if status.Nodes[0].ID != "ws-weighstation-envoy-7d9f8-x2x4q" {
		t.Errorf("node id %q, want the pod name", status.Nodes[0].ID)
	}

	// The ops port answers /usage and /decisions; the HTTP port (open to the metrics peers)
	// does not.
	if code, _ := httpGet(t, p.cpURL+"/decisions"); code != 404 {
		t.Errorf("the HTTP port answers /decisions with %d, not 404: it names clients", code)
	}
	if code, body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/usage", p.ports.ops)); code != 200 || !strings.Contains(string(body), `"tenants"`) {
		t.Errorf("the ops port's /usage: %d %s", code, body)
	}

	// Metrics: the filter's labelled series on the metrics port; the rest of the admin is not.
	code, body := httpGet(t, p.metricsURL+"/stats/prometheus")
	if code != 200 || !regexp.MustCompile(`(?m)^weighstation_policy_generation\{protocol="nats"\} [1-9]`).Match(body) {
		t.Errorf("/stats/prometheus: %d, no weighstation_policy_generation{protocol=\"nats\"}", code)
	}
	for _, path := range []string{"/config_dump", "/quitquitquit", "/drain_listeners"} {
		if code, _ := httpGet(t, p.metricsURL+path); code != 404 {
			t.Errorf("the metrics port answers %s with %d, not 404", path, code)
		}
	}

	// Liveness: the httpGet probe exactly as rendered (no shell in either image).
	live := p.metricsURL + get(p.envoy, "livenessProbe", "httpGet", "path").(string)
	if get(p.envoy, "livenessProbe", "httpGet", "port") != "metrics" {
		t.Errorf("liveness probe %v is not on the metrics port", get(p.envoy, "livenessProbe"))
	}
	if code, body := httpGet(t, live); code != 200 {
		t.Errorf("liveness probe failed against a live Envoy: %d %s", code, body)
	}

	// Termination as the kubelet does it: the drain container (its args as rendered) gets
	// SIGTERM while Envoy's preStop sleeps drainSeconds; Envoy stops accepting once its drain
	// time is over, then SIGTERM ends it well within terminationGracePeriodSeconds.
	drainC := container(t, p.envoyDeploy, "containers", "drain")
	drain := start(t, filepath.Join(t.TempDir(), "drain.log"), weighBin, strings_(drainC["args"])...)
	time.Sleep(300 * time.Millisecond) // its signal handler is installed
	if sleep := get(p.envoy, "lifecycle", "preStop", "sleep", "seconds"); sleep != 2 {
		t.Errorf("preStop sleeps %v, not drainSeconds (2)", sleep)
	}
	if err := drain.stop(5 * time.Second); err != nil || drain.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("drain container at SIGTERM: %v, exit %d", err, drain.cmd.ProcessState.ExitCode())
	}
	refused := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.ports.nats), time.Second)
		if err != nil {
			refused = true
			break
		}
		c.Close()
	}
	if !refused {
		t.Error("Envoy still accepts client connections after the drain")
	}
	// A draining Envoy is alive: the liveness probe must not restart it before it is done.
	if code, _ := httpGet(t, live); code != 200 {
		t.Errorf("liveness probe fails during the drain (%d)", code)
	}
	grace := get(p.envoyDeploy, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)
	if err := p.envoyProc.stop(time.Duration(grace-2) * time.Second); err != nil {
		t.Errorf("Envoy after SIGTERM: %v", err)
	}
}

// podPorts are the ports the pods are rendered with; kafka+1 … kafka+brokers must be free too.
type podPorts struct{ nats, kafka, admin, metrics, xds, http, ops int }

// freePodPorts picks free ports, with `brokers` free ports right after the Kafka port.
func freePodPorts(t *testing.T, brokers int) podPorts {
	t.Helper()
	kafka := freePortRun(t, 1+brokers)
	for {
		ps := freePorts(t, 6)
		clash := false
		for _, p := range ps {
			clash = clash || (p >= kafka && p <= kafka+brokers)
		}
		if !clash {
			return podPorts{nats: ps[0], kafka: kafka, admin: ps[1], metrics: ps[2], xds: ps[3], http: ps[4], ops: ps[5]}
		}
	}
}

// chartPods are the control plane and Envoy, running as the chart renders them.
type chartPods struct {
	ms                manifests
	ports             podPorts
	cp, envoy         map[string]any
	envoyDeploy       object
	cpURL, metricsURL string
	envoyProc         *proc
}

// startChartPods renders the chart with the value files, the ports and the --set pairs, runs
// the control plane with its Deployment's arguments, the init container, and Envoy with its
// container's arguments, and waits until Envoy's readiness probe passes (xDS has configured
// every listener and the module, fetched from the control plane and checked against its sha256,
// runs).
func startChartPods(t *testing.T, valuesFiles []string, ports podPorts, sets ...string) *chartPods {
	t.Helper()
	if _, err := os.Stat(wasmFile); err != nil {
		t.Fatalf("the filter module is not built (make wasm): %v", err)
	}
	ms := mustRender(t, valuesFiles, append([]string{
		fmt.Sprintf("nats.port=%d", ports.nats), fmt.Sprintf("kafka.port=%d", ports.kafka),
		fmt.Sprintf("envoy.adminPort=%d", ports.admin), fmt.Sprintf("envoy.metricsPort=%d", ports.metrics),
		fmt.Sprintf("controlPlane.xdsPort=%d", ports.xds), fmt.Sprintf("controlPlane.httpPort=%d", ports.http),
		fmt.Sprintf("controlPlane.opsPort=%d", ports.ops), "envoy.drainSeconds=2"}, sets...)...)
	cpSvc := ms.find(t, "Service", "-control-plane")
	svcHost := fmt.Sprintf("%s.%s.svc.cluster.local", cpSvc.name(), namespace)
	p := &chartPods{ms: ms, ports: ports}
	p.cp = container(t, ms.find(t, "Deployment", "-control-plane"), "containers", "control-plane")
	p.envoyDeploy = ms.find(t, "Deployment", "-envoy")
	p.envoy = container(t, p.envoyDeploy, "containers", "envoy")
	initC := container(t, p.envoyDeploy, "initContainers", "bootstrap")
	logs := t.TempDir()
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"control-plane.log", "envoy.log"} {
				b, _ := os.ReadFile(filepath.Join(logs, f))
				t.Logf("%s:\n%s", f, tail(string(b), 3000))
			}
		}
	})

	// The control plane pod.
	policies := writePolicies(t, ms.find(t, "ConfigMap", "-policies"))
	cpArgs := strings_(p.cp["args"])
	cpArgs = setFlag(cpArgs, "policy-dir", policies)
	cpArgs = setFlag(cpArgs, "xds-listen", fmt.Sprintf("127.0.0.1:%d", ports.xds))
	cpArgs = setFlag(cpArgs, "http-listen", fmt.Sprintf("127.0.0.1:%d", ports.http))
	cpArgs = setFlag(cpArgs, "ops-listen", fmt.Sprintf("127.0.0.1:%d", ports.ops))
	reportTo, _ := flagValue(cpArgs, "report-address")
	cpArgs = setFlag(cpArgs, "report-address", strings.Replace(reportTo, svcHost, "127.0.0.1", 1))
	cpArgs = setFlag(cpArgs, "serve-wasm", wasmFile)
	cpArgs = withTLSFiles(t, cpArgs)
	cpProc := start(t, filepath.Join(logs, "control-plane.log"), weighBin, cpArgs...)
	p.cpURL = fmt.Sprintf("http://127.0.0.1:%d", ports.http)
	cpProc.waitHTTP(t, p.cpURL+get(p.cp, "readinessProbe", "httpGet", "path").(string), 200, 10*time.Second)

	// The module served is the file, and its URL is the one the chart names.
	code, body := httpGet(t, p.cpURL+"/wasm/weighstation_filter.wasm")
	want, _ := os.ReadFile(wasmFile)
	if code != 200 || sha(body) != sha(want) {
		t.Fatalf("module: %d, sha256 %s, want %s", code, sha(body), sha(want))
	}

	// The Envoy pod: the init container, then Envoy with the container's command and args.
	bootPath := filepath.Join(t.TempDir(), "bootstrap.json")
	initArgs := expandDownwardAPI(t, initC)
	for _, f := range []string{"xds", "wasm-host"} {
		v, _ := flagValue(initArgs, f)
		initArgs = setFlag(initArgs, f, strings.Replace(v, svcHost, "127.0.0.1", 1))
	}
	if out, stderr, code := run(t, nil, weighBin, setFlag(initArgs, "output", bootPath)...); code != 0 {
		t.Fatalf("bootstrap: %d %s%s", code, out, stderr)
	}
	envoyArgs := setEnvoyArg(t, strings_(p.envoy["args"]), "config-path", bootPath)
	p.envoyProc = start(t, filepath.Join(logs, "envoy.log"), envoyBin, envoyArgs...)

	// Readiness, as the kubelet asks it.
	p.metricsURL = fmt.Sprintf("http://127.0.0.1:%d", ports.metrics)
	p.envoyProc.waitHTTP(t, p.metricsURL+get(p.envoy, "readinessProbe", "httpGet", "path").(string), 200, 30*time.Second)
	return p
}

// checkEnvoyListeners compares the listeners the running Envoy has (asked on its admin) with
// the Envoy container's ports: every port is a listener on 0.0.0.0 and every listener a port.
// xDS names a listener as the port with '_' for '-' (kafka_broker_0 for kafka-broker-0); the
// bootstrap's weighstation_metrics is the metrics port; the chart's --kafka-cluster kind is
// named kafka, so its bootstrap listener is kafka_kafka (port kafka) and node n's
// kafka_kafka_node_<n> (port kafka-node-<n>).
func (p *chartPods) checkEnvoyListeners(t *testing.T) {
	t.Helper()
	code, body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/listeners?format=json", p.ports.admin))
	var ls struct {
		ListenerStatuses []struct {
			Name         string `json:"name"`
			LocalAddress struct {
				SocketAddress struct {
					Address   string `json:"address"`
					PortValue int    `json:"port_value"`
				} `json:"socket_address"`
			} `json:"local_address"`
		} `json:"listener_statuses"`
	}
	if err := json.Unmarshal(body, &ls); code != 200 || err != nil {
		t.Fatalf("Envoy admin /listeners: %d %v %s", code, err, body)
	}
	got := map[string]string{}
	for _, l := range ls.ListenerStatuses {
		name := l.Name
		if rest, ok := strings.CutPrefix(name, "kafka_kafka"); ok {
			name = "kafka" + rest
		}
		name = strings.ReplaceAll(strings.TrimPrefix(name, "weighstation_"), "_", "-")
		sa := l.LocalAddress.SocketAddress
		got[name] = fmt.Sprintf("%s:%d", sa.Address, sa.PortValue)
	}
	want := map[string]string{}
	for _, cp := range p.envoy["ports"].([]any) {
		m := cp.(map[string]any)
		want[m["name"].(string)] = fmt.Sprintf("0.0.0.0:%d", m["containerPort"].(int))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Envoy listens on %v, its container ports are %v", got, want)
	}
}

type proc struct {
	cmd  *exec.Cmd
	done chan error
}

// start runs a process for the rest of the test, its output in logPath.
func start(t *testing.T, logPath, name string, args ...string) *proc {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	t.Cleanup(func() { _ = p.stop(5 * time.Second) })
	return p
}

// stop sends SIGTERM and waits up to grace for the process to exit (then kills it).
func (p *proc) stop(grace time.Duration) error {
	if p.cmd.ProcessState != nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("still running %v after SIGTERM", grace)
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// freePortRun returns the first of n consecutive free ports.
func freePortRun(t *testing.T, n int) int {
	t.Helper()
	for try := 0; try < 100; try++ {
		base := freePorts(t, 1)[0]
		var ls []net.Listener
		ok := base+n-1 <= 65535
		for i := 1; ok && i < n; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

func httpGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func waitHTTP(t *testing.T, url string, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body := httpGet(t, url)
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %s after %v, want %d", url, code, strings.TrimSpace(string(body)), timeout, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitHTTP waits until url answers want, failing at once if the process exits meanwhile.
func (p *proc) waitHTTP(t *testing.T, url string, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body := httpGet(t, url)
		if code == want {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err // for stop
			t.Fatalf("%s exited (%v) before %s answered %d", p.cmd.Path, err, url, want)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %s after %v, want %d", url, code, strings.TrimSpace(string(body)), timeout, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	sc := bufio.NewScanner(strings.NewReader(s[len(s)-n:]))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines, "\n")
}
