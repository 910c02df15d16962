// Package e2e installs the chart on a real single-node cluster (package node) and drives it as
// a platform team and a tenant team would (package cluster): brokers as StatefulSets, the chart
// with the values a platform team writes, a team's LimitPolicy applied with kubectl, clients as
// pods reaching the gateway by its Service, rollouts and failures under fixed-rate load, each
// counted at the brokers. WEIGHSTATION_K8S_NODE=smoke runs the light form `make test` runs (one
// nats-server, one broker, two Envoys, one rollout); full runs the whole table (`make
// test-k8s-node`).
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weighstation/weighstation/helm/node/cluster"
	"github.com/weighstation/weighstation/helm/node/node"
)

var (
	root = os.Getenv("WEIGHSTATION_ROOT")
	mode = os.Getenv("WEIGHSTATION_K8S_NODE")
	k    *cluster.Kube
	im   cluster.Images
	topo cluster.Topology
)

func full() bool { return mode == "full" }

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	switch {
	case root == "":
	case mode == "smoke":
		topo = cluster.Smoke
	case mode == "full":
		topo = cluster.Full
	}
	if topo.Name == "" {
		fmt.Fprintln(os.Stderr, "set WEIGHSTATION_ROOT (the repository) and WEIGHSTATION_K8S_NODE=smoke or full (make test-k8s-node-smoke, make test-k8s-node)")
		return 2
	}
	var err error
	if im, err = cluster.ImagesIn(root); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "weighstation-k8s-node-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tools := filepath.Join(root, ".tools")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	begin := time.Now()
	args := []string{
		"--dir", dir, "--k8s-bin", filepath.Join(tools, "k8s", "bin"), "--node-bin", filepath.Join(tools, "k8s", "node-bin"),
		"--images", strings.Join(im.Layouts, ","), "--pause-image", im.Pause, "--coredns-image", im.CoreDNS,
	}
	if full() {
		args = append(args, "--network-policy") // the smoke has no NetworkPolicy row
	}
	n, err := node.Start(ctx, node.Dirs{Root: dir}, filepath.Join(tools, "bin", "weighstation-k8s-node"), args, 5*time.Minute)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	fmt.Printf("node %s ready in %.1fs (%s)\n", n.ID, time.Since(begin).Seconds(), dir)
	k = &cluster.Kube{Kubeconfig: n.Dirs.Kubeconfig(), Kubectl: filepath.Join(tools, "k8s", "bin", "kubectl"),
		Helm: filepath.Join(tools, "bin", "helm"), Root: root, Manifests: filepath.Join(dir, "manifests")}
	// Interrupted (Ctrl-C; go test's -timeout panics instead, so it is set well above the
	// tests' own deadlines): the node is stopped all the same.
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		if _, ok := <-interrupted; ok {
			fmt.Fprintln(os.Stderr, "interrupted: stopping the node")
			n.Stop()
			os.Exit(1)
		}
	}()
	code := m.Run()
	signal.Stop(interrupted)
	close(interrupted)

	begin = time.Now()
	n.Stop()
	fmt.Printf("node stopped in %.1fs\n", time.Since(begin).Seconds())
	// Nothing the node made may outlive it, whether the tests passed or not: a second run on
	// this machine must start as clean as the first.
	if left := n.Leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the node left behind:\n  %s\n", strings.Join(left, "\n  "))
		return 1
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Printf("the node's logs: %s\n", n.Dirs.Logs())
	}
	return code
}

// kubectl, asEditor, helm and podIPs run k's commands and fail the test on an error.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.Run("", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func asEditor(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.AsEditor(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.RunHelm(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func podIPs(t *testing.T, ns, selector string) map[string]string {
	t.Helper()
	ips, err := k.PodIPs(ns, selector)
	if err != nil {
		t.Fatal(err)
	}
	return ips
}
