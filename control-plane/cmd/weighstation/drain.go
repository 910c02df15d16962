package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// drainCmd is the Envoy pod's drain sidecar. Envoy exits at SIGTERM without draining, and the
// official Envoy image has no shell for a preStop script, so a container of our own image shares
// the pod's network namespace and, when the pod is deleted (its own SIGTERM, sent as the Envoy
// container's preStop sleep begins), asks Envoy's localhost admin to drain its listeners
// gracefully. Envoy keeps its open connections until the sleep ends and its SIGTERM arrives.
func drainCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", "127.0.0.1:9901", "host:port of Envoy's admin listener")
	now := fs.Bool("now", false, "drain at once and exit, instead of waiting for SIGTERM")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the admin's answer")
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if !*now {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
		fmt.Fprintf(stdout, "weighstation drain: waiting for SIGTERM to drain Envoy's listeners (admin %s)\n", *admin)
		<-signals
	}
	if err := drainListeners(*admin, *timeout); err != nil {
		fmt.Fprintf(stderr, "weighstation drain: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "weighstation drain: Envoy is draining its listeners (%s)\n", time.Now().UTC().Format(time.RFC3339Nano))
	return 0
}

// drainListeners asks the admin for a graceful drain: listeners stop accepting after Envoy's
// --drain-time-s, connections already open are kept.
func drainListeners(admin string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+admin+"/drain_listeners?graceful", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("draining Envoy's listeners: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("draining Envoy's listeners: admin answered %s: %s", resp.Status, body)
	}
	return nil
}
