// Package kubeapi runs a real etcd and kube-apiserver on loopback ports for a benchmark whose
// policies are Kubernetes objects (the binaries `scripts/install-tools.sh k8s kubectl` puts into
// .tools/k8s/bin), and drives them with the real kubectl. It is the load-tests module's own
// copy of what control-plane/internal/apiserver does for the e2e tests, which this module
// cannot import.
package kubeapi

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// adminToken authenticates as a member of system:masters.
const adminToken = "weighstation-bench-admin-token"

// Server is a running API server and its etcd.
type Server struct {
	URL        string // https://127.0.0.1:PORT
	Kubeconfig string // the admin's
	dir, bin   string
	procs      []*exec.Cmd
	client     *http.Client
}

// Start runs etcd and kube-apiserver from <k8sBin> with their data and logs under dir, waits
// until the API server is ready and writes an admin kubeconfig.
func Start(dir, k8sBin string) (*Server, error) {
	s := &Server{dir: dir, bin: k8sBin, client: &http.Client{Timeout: time.Minute,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	if err := s.start("etcd", "--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", etcdPeer),
		"--unsafe-no-fsync"); err != nil {
		return nil, err
	}
	if err := wait(&http.Client{Timeout: time.Second}, fmt.Sprintf("http://127.0.0.1:%d/health", etcdClient), 30*time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("etcd: %w (log %s)", err, s.log("etcd"))
	}
	saKey, tokens := filepath.Join(dir, "sa.key"), filepath.Join(dir, "tokens.csv")
	if err := writeRSAKey(saKey); err != nil {
		s.Stop()
		return nil, err
	}
	if err := os.WriteFile(tokens, []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.start("kube-apiserver", "--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(apiPort), "--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", tokens, "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-cluster-ip-range", "10.96.0.0/16"); err != nil {
		s.Stop()
		return nil, err
	}
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if err := wait(s.client, s.URL+"/readyz", 90*time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("kube-apiserver: %w (log %s)", err, s.log("kube-apiserver"))
	}
	s.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	return s, os.WriteFile(s.Kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: bench, context: {cluster: bench, user: admin}}]
current-context: bench
`, s.URL, adminToken)), 0o600)
}

// Kubectl runs the real kubectl against the server (stdin, if not empty, as its input) and
// returns its output.
func (s *Server) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "kubectl"), append([]string{"--kubeconfig", s.Kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, tail(string(out)))
	}
	return string(out), nil
}

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// Get decodes the JSON of a GET of path (as the admin) into v.
func (s *Server) Get(path string, v any) error {
	req, err := http.NewRequest("GET", s.URL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Processes are the PIDs of etcd and kube-apiserver.
func (s *Server) Processes() map[string]int {
	out := map[string]int{}
	for _, c := range s.procs {
		out[filepath.Base(c.Path)] = c.Process.Pid
	}
	return out
}

func (s *Server) log(name string) string { return filepath.Join(s.dir, name+".log") }

// Stop stops both processes by their process groups: SIGTERM, then SIGKILL.
func (s *Server) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		cmd := s.procs[i]
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	s.procs = nil
}

func (s *Server) start(name string, args ...string) error {
	bin := filepath.Join(s.bin, name)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: %w (scripts/install-tools.sh k8s kubectl builds it)", name, err)
	}
	log, err := os.Create(s.log(name))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	s.procs = append(s.procs, cmd)
	return nil
}

func wait(c *http.Client, url string, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return errors.New(url + " was not ready within " + timeout.String())
}

func freePorts(n int) ([]int, error) {
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}
