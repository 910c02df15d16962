package e2ecluster

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// natsCLI is natscli's `nats sub` through the gateway, as an operator would leave it running:
// it must ride through every event on its own (natscli reconnects as nats.go does).
type natsCLI struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []time.Time
	exited chan struct{}
	err    error
}

func startNatsCLISub(t *testing.T, user, subject string) *natsCLI {
	t.Helper()
	n := &natsCLI{exited: make(chan struct{})}
	n.cmd = exec.Command(filepath.Join(root, ".tools/bin/nats"), "sub", subject, "--raw",
		"--server", gatewayURLs(), "--user", user, "--password", user+"-secret", "--no-context")
	out, err := n.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			n.mu.Lock()
			n.lines = append(n.lines, time.Now())
			n.mu.Unlock()
		}
		n.err = n.cmd.Wait()
		close(n.exited)
	}()
	return n
}

// check stops it: it must still have been running, and have received messages after `after`.
func (n *natsCLI) check(t *testing.T, after time.Time) {
	t.Helper()
	select {
	case <-n.exited:
		t.Errorf("natscli nats sub exited during the event: %v", n.err)
		return
	default:
	}
	_ = n.cmd.Process.Kill()
	<-n.exited
	n.mu.Lock()
	defer n.mu.Unlock()
	since := 0
	for _, at := range n.lines {
		if at.After(after) {
			since++
		}
	}
	if since == 0 {
		t.Errorf("natscli nats sub received nothing after the fault (%d messages before)", len(n.lines))
	}
	t.Logf("natscli nats sub: %d messages, %d after the fault, still running", len(n.lines), since)
}
