// Package kubeapi runs a real etcd and kube-apiserver for a benchmark whose policies are
// Kubernetes objects, through weighstation-kubeapi (control-plane/cmd/kubeapi: the e2e tests'
// own API server, which this module cannot import), and drives them with the real kubectl.
package kubeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Server is a running API server and its etcd.
type Server struct {
	Kubeconfig string // the admin's
	kubectl    string
	cmd        *exec.Cmd
}

// Start runs weighstation-kubeapi from toolsBin (with etcd and kube-apiserver from k8sBin),
// their data and logs under dir, and waits until the API server is ready.
func Start(dir, toolsBin, k8sBin string) (*Server, error) {
	cmd := exec.Command(filepath.Join(toolsBin, "weighstation-kubeapi"), "-dir", dir, "-k8s-bin", k8sBin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting weighstation-kubeapi: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	kubeconfig, ok := strings.CutPrefix(strings.TrimSpace(line), "kubeconfig=")
	if err != nil || !ok {
		_ = cmd.Wait()
		return nil, fmt.Errorf("weighstation-kubeapi did not start: %s", strings.TrimSpace(stderr.String()))
	}
	return &Server{Kubeconfig: kubeconfig, kubectl: filepath.Join(k8sBin, "kubectl"), cmd: cmd}, nil
}

// Kubectl runs the real kubectl against the server (stdin, if not empty, as its input) and
// returns its output.
func (s *Server) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.kubectl, append([]string{"--kubeconfig", s.Kubeconfig}, args...)...)
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

// Get decodes the JSON of a GET of path (kubectl get --raw) into v.
func (s *Server) Get(path string, v any) error {
	out, err := s.Kubectl(context.Background(), "", "get", "--raw", path)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(out), v)
}

// Stop stops the API server and etcd (SIGTERM, then SIGKILL).
func (s *Server) Stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}
