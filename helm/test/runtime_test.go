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
// Service's DNS name, temporary paths for the volumes, free ports. Then the probes, the drain
// hook and the metrics listener are exercised against the real processes.
func TestChartPodsRunWithRealEnvoy(t *testing.T) {
	if _, err := os.Stat(wasmFile); err != nil {
		t.Fatalf("the filter module is not built (make wasm): %v", err)
	}
	ports := freePorts(t, 6)
	natsPort, kafkaPort, adminPort, metricsPort, xdsPort, httpPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	ms := mustRender(t, nil,
		fmt.Sprintf("nats.port=%d", natsPort), fmt.Sprintf("kafka.port=%d", kafkaPort),
		fmt.Sprintf("envoy.adminPort=%d", adminPort), fmt.Sprintf("envoy.metricsPort=%d", metricsPort),
		fmt.Sprintf("controlPlane.xdsPort=%d", xdsPort), fmt.Sprintf("controlPlane.httpPort=%d", httpPort),
		"envoy.drainSeconds=2")
	cpSvc := ms.find(t, "Service", "-control-plane")
	svcHost := fmt.Sprintf("%s.%s.svc.cluster.local", cpSvc.name(), namespace)
	cp := container(t, ms.find(t, "Deployment", "-control-plane"), "containers", "control-plane")
	envoyDeploy := ms.find(t, "Deployment", "-envoy")
	envoy := container(t, envoyDeploy, "containers", "envoy")
	initC := container(t, envoyDeploy, "initContainers", "bootstrap")
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
	cpArgs := strings_(cp["args"])
	cpArgs = setFlag(cpArgs, "policy-dir", policies)
	cpArgs = setFlag(cpArgs, "xds-listen", fmt.Sprintf("127.0.0.1:%d", xdsPort))
	cpArgs = setFlag(cpArgs, "http-listen", fmt.Sprintf("127.0.0.1:%d", httpPort))
	cpArgs = setFlag(cpArgs, "serve-wasm", wasmFile)
	start(t, filepath.Join(logs, "control-plane.log"), weighBin, cpArgs...)
	cpURL := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	waitHTTP(t, cpURL+get(cp, "readinessProbe", "httpGet", "path").(string), 200, 10*time.Second)

	// The module served is the file, and its URL is the one the chart names.
	code, body := httpGet(t, cpURL+"/wasm/weighstation_filter.wasm")
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
	envoyArgs := setEnvoyArg(t, strings_(envoy["args"]), "config-path", bootPath)
	envoyProc := start(t, filepath.Join(logs, "envoy.log"), envoyBin, envoyArgs...)

	// Readiness, as the kubelet asks it: ready only once xDS has configured the listeners and
	// the module, fetched from the control plane and checked against its sha256, is running.
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d", metricsPort)
	waitHTTP(t, metricsURL+get(envoy, "readinessProbe", "httpGet", "path").(string), 200, 30*time.Second)
	for _, p := range []int{natsPort, kafkaPort} {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), 2*time.Second); err != nil {
			t.Errorf("client listener %d: %v", p, err)
		} else {
			c.Close()
		}
	}
	var status struct {
		Active struct{ Version string } `json:"active"`
		Nodes  []struct {
			ID           string `json:"id"`
			AckedVersion string `json:"ackedVersion"`
		} `json:"nodes"`
	}
	_, body = httpGet(t, cpURL+"/status")
	if err := json.Unmarshal(body, &status); err != nil || len(status.Nodes) != 1 || status.Nodes[0].AckedVersion != status.Active.Version || status.Active.Version == "" {
		t.Errorf("/status after Envoy is ready: %s", body)
	} else if status.Nodes[0].ID != "ws-weighstation-envoy-7d9f8-x2x4q" {
		t.Errorf("node id %q, want the pod name", status.Nodes[0].ID)
	}

	// Metrics: the filter's labelled series on the metrics port; the rest of the admin is not.
	code, body = httpGet(t, metricsURL+"/stats/prometheus")
	if code != 200 || !regexp.MustCompile(`(?m)^weighstation_policy_generation\{protocol="nats"\} [1-9]`).Match(body) {
		t.Errorf("/stats/prometheus: %d, no weighstation_policy_generation{protocol=\"nats\"}", code)
	}
	for _, path := range []string{"/config_dump", "/quitquitquit", "/drain_listeners"} {
		if code, _ := httpGet(t, metricsURL+path); code != 404 {
			t.Errorf("the metrics port answers %s with %d, not 404", path, code)
		}
	}

	// Liveness: the exec probe exactly as rendered.
	live := strings_(get(envoy, "livenessProbe", "exec", "command"))
	if out, stderr, code := run(t, nil, live[0], live[1:]...); code != 0 {
		t.Errorf("liveness probe failed against a live Envoy: %d %s%s", code, out, stderr)
	}

	// Termination: the preStop hook drains (Envoy stops accepting once drainSeconds are over),
	// then SIGTERM ends Envoy well within terminationGracePeriodSeconds.
	hook := strings_(get(envoy, "lifecycle", "preStop", "exec", "command"))
	begin := time.Now()
	if out, stderr, code := run(t, nil, hook[0], hook[1:]...); code != 0 {
		t.Errorf("preStop: %d %s%s", code, out, stderr)
	}
	if d := time.Since(begin); d < 2*time.Second {
		t.Errorf("preStop returned after %v, before drainSeconds", d)
	}
	refused := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", natsPort), time.Second)
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
	if _, _, code := run(t, nil, live[0], live[1:]...); code != 0 {
		t.Errorf("liveness probe fails during the drain (exit %d)", code)
	}
	grace := get(envoyDeploy, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)
	if err := envoyProc.stop(time.Duration(grace-2) * time.Second); err != nil {
		t.Errorf("Envoy after SIGTERM: %v", err)
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
