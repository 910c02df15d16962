// Package natsserver starts the nats-server that make tools installed, for tests: on a free
// loopback port, stopped by its PID when the test ends.
package natsserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Server is a running nats-server.
type Server struct {
	Addr string
	cmd  *exec.Cmd
}

// Start runs $NATS_SERVER (default: the repository's .tools/bin/nats-server) with extra
// arguments.
func Start(t *testing.T, args ...string) *Server {
	t.Helper()
	bin := os.Getenv("NATS_SERVER")
	if bin == "" {
		bin = findTool(t, "nats-server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-l", filepath.Join(dir, "nats-server.log"), "-sd", dir}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s (run make tools, or set NATS_SERVER): %v", bin, err)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // in case a test stopped it and failed
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond); err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server did not listen on %s", s.Addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Signal sends sig to the server (SIGSTOP/SIGCONT for stall tests).
func (s *Server) Signal(sig syscall.Signal) error { return s.cmd.Process.Signal(sig) }

// findTool looks for .tools/bin/name in the test's directory and its parents.
func findTool(t *testing.T, name string) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		bin := filepath.Join(dir, ".tools", "bin", name)
		if _, err := os.Stat(bin); err == nil {
			return bin
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no .tools/bin/%s above the test directory (run make tools, or set NATS_SERVER)", name)
		}
		dir = parent
	}
}
