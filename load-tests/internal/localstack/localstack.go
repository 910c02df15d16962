// Package localstack runs the whole local stack (weighstation-localstack, what `make run`
// starts) for a benchmark: in a scratch root whose .tools and wasm-filter link to the
// repository's, with the benchmark's own policies, on free ports.
package localstack

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// portEnv are the local stack's port variables (see the README); each gets a free port so the
// benchmark never collides with a `make run` on the defaults.
// NATS_PLAIN_PORT and KAFKA_PLAIN_PORT also turn on the Envoy listeners without the filter, the
// tcp-proxy baselines.
var portEnv = []string{"NATS_PORT", "KAFKA_PORT", "ADMIN_PORT", "NATS_UPSTREAM_PORT", "KAFKA_UPSTREAM_PORT",
	"KAFKA_CONTROLLER_PORT", "XDS_PORT", "CONTROL_PLANE_PORT", "KAFKA_DIRECT_PORT", "KAFKA_BROKER_PORT", "NATS_PLAIN_PORT",
	"KAFKA_PLAIN_PORT", "KAFKA_SASL_PORT", "KAFKA_SASL_UPSTREAM_PORT", "NATS_TLS_PORT", "KAFKA_TLS_PORT", "KAFKA_SASL_SSL_PORT",
	"KAFKA_SSL_UPSTREAM_PORT", "KAFKA_SASL_SSL_UPSTREAM_PORT"}

// Stack is the whole local stack (weighstation-localstack), started in a scratch root whose
// .tools and wasm-filter link to the repository's, so its run/ directory, ports and policies
// are the benchmark's own.
type Stack struct {
	cmd     *exec.Cmd
	scratch string
	ports   map[string]int
	exited  chan struct{}
}

const startTimeout = 3 * time.Minute

// NoopPortEnv are the ports of the optional listeners whose filter does nothing, a no-op Wasm
// or native module (the CPU benchmark's floors): a benchmark that wants them passes them to
// Start as morePorts, so that no other stack pays for their modules.
var NoopPortEnv = []string{"NATS_NOOP_WASM_PORT", "NATS_NOOP_NATIVE_PORT", "KAFKA_NOOP_WASM_PORT", "KAFKA_NOOP_NATIVE_PORT"}

// Start starts the stack: policies writes the benchmark's policies into the directory it is
// given, morePorts are optional listeners' port variables to turn on beside portEnv's (free
// ports too), and env adds to the stack's environment (EXTRA_NATS_USERS for users the policies
// name, say).
func Start(root string, policies func(dir string) error, morePorts []string, env ...string) (*Stack, error) {
	scratch, err := os.MkdirTemp("", "weighstation-bench-")
	if err != nil {
		return nil, err
	}
	s := &Stack{scratch: scratch, ports: map[string]int{}, exited: make(chan struct{})}
	for _, dir := range []string{".tools", "wasm-filter"} {
		if err := os.Symlink(filepath.Join(root, dir), filepath.Join(scratch, dir)); err != nil {
			return nil, err
		}
	}
	policyDir := filepath.Join(scratch, "policies")
	if err := os.MkdirAll(policyDir, 0o755); err != nil {
		return nil, err
	}
	if err := policies(policyDir); err != nil {
		return nil, err
	}
	env = append(append(os.Environ(), "POLICY_DIR="+policyDir), env...)
	names := append(append([]string(nil), portEnv...), morePorts...)
	ports, err := freePorts(len(names))
	if err != nil {
		return nil, err
	}
	for i, name := range names {
		s.ports[name] = ports[i]
		env = append(env, fmt.Sprintf("%s=%d", name, ports[i]))
	}
	s.cmd = exec.Command(filepath.Join(root, ".tools", "bin", "weighstation-localstack"), "-root", scratch)
	s.cmd.Env = env
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.cmd.Stderr = s.cmd.Stdout
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	go func() {
		defer close(s.exited)
		log, _ := os.Create(filepath.Join(scratch, "localstack.log"))
		defer log.Close()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if strings.HasPrefix(sc.Text(), "weighstation is up") {
				close(ready)
			}
		}
		_, _ = io.Copy(log, out)
		_ = s.cmd.Wait()
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("the local stack exited while starting; see %s/localstack.log and %s/run/logs", scratch, scratch)
	case <-time.After(startTimeout):
		s.Stop()
		return nil, fmt.Errorf("the local stack was not up within %s; see %s/localstack.log", startTimeout, scratch)
	}
}

// Addr is the loopback address of one of portEnv's ports, or of Start's morePorts.
func (s *Stack) Addr(env string) string { return "127.0.0.1:" + strconv.Itoa(s.ports[env]) }

// AckedVersion is the policy version the stack's Envoy last acknowledged, from the control
// plane's /status.
func (s *Stack) AckedVersion() (string, error) {
	resp, err := http.Get("http://" + s.Addr("CONTROL_PLANE_PORT") + "/status")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var st struct {
		Nodes []struct {
			AckedVersion string `json:"ackedVersion"`
		} `json:"nodes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return "", err
	}
	if len(st.Nodes) != 1 {
		return "", fmt.Errorf("%d Envoys in the control plane's /status, want 1", len(st.Nodes))
	}
	return st.Nodes[0].AckedVersion, nil
}

// WaitAcked waits until the stack's Envoy acknowledged a policy version other than before,
// polling every 5 ms (a benchmark times it).
func (s *Stack) WaitAcked(ctx context.Context, before string, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if v, err := s.AckedVersion(); err == nil && v != before && v != "" {
			return nil
		}
	}
	return fmt.Errorf("no policy version after %s acknowledged within %s", before, timeout)
}

// PolicyDir is where the stack's control plane reads policies: a benchmark may change them.
func (s *Stack) PolicyDir() string { return filepath.Join(s.scratch, "policies") }

// CAFile is the CA the stack's TLS listeners present certificates from (issued at its start).
func (s *Stack) CAFile() string { return filepath.Join(s.scratch, "run", "tls", "ca.crt") }

// Stop sends SIGTERM to the stack (its own handler stops every process it started), waits,
// and removes the scratch root.
func (s *Stack) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	_ = os.RemoveAll(s.scratch)
}

// Processes maps the stack's children to their PIDs, so each measurement can record their CPU
// use: envoy, nats-server, kafka (java) and the control plane.
func (s *Stack) Processes() map[string]int {
	names := map[string]string{"envoy": "envoy", "nats-server": "nats-server", "java": "kafka", "weighstation": "control-plane"}
	out := map[string]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		open, close := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(string(b[close+1:])) // f[1] is the parent's PID
		if len(f) < 2 || f[1] != strconv.Itoa(s.cmd.Process.Pid) {
			continue
		}
		if name, ok := names[string(b[open+1:close])]; ok {
			out[name] = pid
		}
	}
	return out
}

// freePorts picks n distinct free loopback ports (holding each until all are picked).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
