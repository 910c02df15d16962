package weighstation_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The stall calibration for k6: the request/reply scenario at 1000 iterations/s with 20 VUs
// against a nats-server stopped (SIGSTOP) for 1 s in the middle. k6 cannot start an iteration
// without a free VU, so during the stall it does not send — it drops the iterations and counts
// them — and its latency trend shows only the 20 requests that were waiting. What must hold is
// that k6 says so: dropped_iterations counts most of the stall's 1000 iterations, the
// scenario's dropped_iterations threshold fails the run, and the trend's max shows the stall.
func TestK6ReportsTheStallAsDroppedIterations(t *testing.T) {
	k6 := k6Binary(t)
	addr, server := startNATSServer(t)
	summary := filepath.Join(t.TempDir(), "summary.json")
	cmd := exec.Command(k6, "run", "--quiet", "--no-color", "--summary-export", summary,
		"-e", "NATS_URL=nats://"+addr, "-e", "RATE=1000", "-e", "DURATION=10s", "-e", "VUS=20", "-e", "MAX_VUS=20",
		"scenarios/nats-request.js")
	cmd.Env = append(os.Environ(), "K6_NO_USAGE_REPORT=true")
	out, _ := os.Create(filepath.Join(t.TempDir(), "k6.log"))
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// k6 takes about a second to start; the stall falls in the middle of its 10 s.
	time.Sleep(5 * time.Second)
	_ = server.Process.Signal(syscall.SIGSTOP)
	time.Sleep(time.Second)
	_ = server.Process.Signal(syscall.SIGCONT)
	err := cmd.Wait()

	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 99 { // 99: thresholds failed
		log, _ := os.ReadFile(out.Name())
		t.Fatalf("k6 exited with %v, want 99 (a threshold failed)\n%s", err, log)
	}
	var s struct {
		Metrics map[string]map[string]any `json:"metrics"`
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	dropped, _ := s.Metrics["dropped_iterations"]["count"].(float64)
	maxMs, _ := s.Metrics["weighstation_duration{op:nats_request}"]["max"].(float64)
	p99, _ := s.Metrics["weighstation_duration{op:nats_request}"]["p(99)"].(float64)
	t.Logf("k6 with a 1 s stall: %v iterations dropped, request p99 %.3f ms, max %.3f ms", dropped, p99, maxMs)
	if dropped < 700 {
		t.Errorf("%v dropped iterations, want most of the ~980 scheduled during the stall", dropped)
	}
	if maxMs < 900 {
		t.Errorf("max request duration %.1f ms, want ≈ 1000 (the stall)", maxMs)
	}
}

// k6Binary is $K6 (what make builds), or a fresh build of ./cmd/k6.
func k6Binary(t *testing.T) string {
	if k6 := os.Getenv("K6"); k6 != "" {
		return k6
	}
	bin := filepath.Join(t.TempDir(), "k6")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/k6").CombinedOutput(); err != nil {
		t.Fatalf("building k6: %v\n%s", err, out)
	}
	return bin
}

// startNATSServer runs the nats-server make tools installed on a free loopback port and stops
// it by its PID when the test ends.
func startNATSServer(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	bin := os.Getenv("NATS_SERVER")
	if bin == "" {
		bin, _ = filepath.Abs("../../.tools/bin/nats-server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-l", filepath.Join(t.TempDir(), "nats-server.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s (run make tools, or set NATS_SERVER): %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return addr, cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
