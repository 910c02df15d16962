package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var natsBenchRate = regexp.MustCompile(`stats: ([\d,]+) msgs/sec`)

// natsBench publishes to subject as a tenant (acme: limits enforced, never reached; baseline on
// nats-server itself) with natscli's `nats bench pub`, over TLS (handshake first, trusting the
// stack's CA) when asked, and returns the messages per second it reports.
func (s *suite) natsBench(ctx context.Context, addr, subject string, as tenant, size, messages int, overTLS bool) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	server := []string{"--server", "nats://" + addr}
	if overTLS {
		server = []string{"--server", "tls://" + addr, "--tlsfirst", "--tlsca", s.stack.CAFile()}
	}
	args := append([]string{"bench", "pub", subject, "--msgs", strconv.Itoa(messages), "--size", strconv.Itoa(size),
		"--no-progress", "--user", as.natsUser, "--password", as.natsPassword}, server...)
	cmd := exec.CommandContext(ctx, filepath.Join(s.root, ".tools", "bin", "nats"), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("nats bench: %w: %s", err, lastLines(out, 5))
	}
	m := natsBenchRate.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("nats bench printed no rate: %s", lastLines(out, 5))
	}
	return strconv.ParseFloat(strings.ReplaceAll(string(m[1]), ",", ""), 64)
}
