// Package apiserver runs a real kube-apiserver with its etcd on loopback ports, for tests of
// what the control plane does with Kubernetes objects. The binaries are the ones `make tools`
// builds from the k8s.io/kubernetes and etcd modules into .tools/k8s/bin; there are no nodes,
// controllers or schedulers.
package apiserver

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// AdminToken authenticates as a member of system:masters.
const AdminToken = "weighstation-test-admin-token"

// Server is a running API server and etcd.
type Server struct {
	URL   string // https://127.0.0.1:PORT
	dir   string
	procs []*exec.Cmd
}

// Start runs etcd and kube-apiserver (RBAC authorization, service account tokens, token-file
// admin) with their data and logs under dir, and waits until the API server is ready.
func Start(dir, apiserverBin, etcdBin string) (*Server, error) {
	s := &Server{dir: dir}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	if err := s.start("etcd", etcdBin,
		"--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
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
		return nil, fmt.Errorf("etcd: %w (log %s)", err, s.Log("etcd"))
	}
	saKey := filepath.Join(dir, "sa.key")
	tokens := filepath.Join(dir, "tokens.csv")
	if err := writeRSAKey(saKey); err != nil {
		s.Stop()
		return nil, err
	}
	if err := os.WriteFile(tokens, []byte(AdminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.start("kube-apiserver", apiserverBin,
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdClient),
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
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if err := wait(insecure, s.URL+"/readyz", 90*time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("kube-apiserver: %w (log %s)", err, s.Log("kube-apiserver"))
	}
	return s, nil
}

// Kubeconfig writes a kubeconfig for a bearer token and returns its path.
func (s *Server) Kubeconfig(name, token string) (string, error) {
	path := filepath.Join(s.dir, name+".kubeconfig")
	return path, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: %s, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: %s}}]
current-context: test
`, s.URL, name, token, name)), 0o600)
}

// Log is the path of a process's log ("etcd", "kube-apiserver").
func (s *Server) Log(name string) string { return filepath.Join(s.dir, name+".log") }

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

func (s *Server) start(name, bin string, args ...string) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: %w (make tools builds it)", name, err)
	}
	log, err := os.Create(s.Log(name))
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
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New(url + " was not ready within " + timeout.String())
}

func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der := x509.MarshalPKCS1PrivateKey(key)
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600)
}
