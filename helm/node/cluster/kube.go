// Package cluster sets up what a platform team and a tenant team put on a cluster: the brokers
// as StatefulSets, the chart with the values a platform team writes, the platform's
// GatewayDefaults and a team's LimitPolicies applied by the team's own editor. The node tests
// and `make run-k8s` run it against the node (package node). Every command is a kubectl or
// helm command line as a user types it, kept in a transcript: docs/operations.md's quick start
// lists the same commands in the same order, and the smoke test checks that it does.
package cluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Kube runs kubectl and helm against a cluster, as a user would.
type Kube struct {
	Kubeconfig, Kubectl, Helm string
	// Root is the repository: paths in it are recorded relative to it (helm/weighstation).
	Root string
	// Manifests is the directory the files it applies are written to ($MANIFESTS in the
	// transcript).
	Manifests string
	// Log, when set, gets each command line as it runs.
	Log io.Writer
	// Transcript is every command run, as a user types it: kubectl and helm with KUBECONFIG
	// exported, files in $MANIFESTS.
	Transcript []string
}

// record adds a command line to the transcript, as a user types it.
func (k *Kube) record(name string, args []string) {
	line := name + " " + strings.ReplaceAll(strings.Join(args, " "), k.Manifests, "$MANIFESTS")
	if k.Root != "" {
		line = strings.ReplaceAll(line, k.Root+"/", "")
	}
	k.Transcript = append(k.Transcript, line)
	if k.Log != nil {
		fmt.Fprintf(k.Log, "$ %s\n", line)
	}
}

// Run runs kubectl with args (stdin if not empty) and returns its output. Commands that only
// look (get, logs) are not recorded: they are the tests' observations, not a user's steps.
func (k *Kube) Run(stdin string, args ...string) (string, error) {
	if recorded(args) {
		k.record("kubectl", args)
	}
	cmd := exec.Command(k.Kubectl, append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// recorded: the verbs of a user's steps.
func recorded(args []string) bool {
	for _, a := range args {
		switch a {
		case "apply", "create", "rollout", "describe", "scale", "delete":
			return true
		case "get", "logs", "exec", "wait":
			return false
		}
	}
	return false
}

// RunHelm runs helm.
func (k *Kube) RunHelm(args ...string) (string, error) {
	k.record("helm", args)
	out, err := exec.Command(k.Helm, append(args, "--kubeconfig", k.Kubeconfig)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Write writes a file of the setup into Manifests and returns its path.
func (k *Kube) Write(name, content string) (string, error) {
	if err := os.MkdirAll(k.Manifests, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(k.Manifests, name)
	return path, os.WriteFile(path, []byte(content), 0o644)
}

// Apply writes manifest as name in Manifests and applies it with kubectl (as user, when not
// empty).
func (k *Kube) Apply(name, manifest, user string) error {
	path, err := k.Write(name, manifest)
	if err != nil {
		return err
	}
	args := []string{"apply", "-f", path}
	if user != "" {
		args = append([]string{"--as", user}, args...)
	}
	_, err = k.Run("", args...)
	return err
}

// WaitReady waits until every pod of ns matching selector (at least want) is Ready. A pod that
// does not get there is reported with its events and its containers' logs, never as a bare
// timeout. It returns how long it waited.
func (k *Kube) WaitReady(ns, selector string, want int, timeout time.Duration) (time.Duration, error) {
	begin := time.Now()
	for {
		out, err := k.Run("", "-n", ns, "get", "pods", "-l", selector, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp} {range .status.conditions[?(@.type=="Ready")]}{.status}{end}{"\n"}{end}`)
		ready, total := 0, 0
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			if len(f) == 0 {
				continue
			}
			total++
			if len(f) == 2 && f[1] == "True" {
				ready++
			}
		}
		if err == nil && ready >= want && total == ready {
			return time.Since(begin), nil
		}
		if time.Since(begin) > timeout {
			return 0, fmt.Errorf("%d of %d pods %s in %s Ready after %v (want %d)%s", ready, total, selector, ns, timeout, want, k.Diagnose(ns, selector))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Diagnose is what a user would look at: the pods, their namespace's events and their
// containers' logs.
func (k *Kube) Diagnose(ns, selector string) string {
	var b strings.Builder
	pods, _ := k.Run("", "-n", ns, "get", "pods", "-l", selector, "-o", "wide")
	fmt.Fprintf(&b, "\n%s", pods)
	events, _ := k.Run("", "-n", ns, "get", "events", "--sort-by=.lastTimestamp")
	fmt.Fprintf(&b, "\nevents in %s:\n%s", ns, Tail(events, 4000))
	names, _ := k.Run("", "-n", ns, "get", "pods", "-l", selector, "-o", "name")
	for _, pod := range strings.Fields(names) {
		logs, _ := k.Run("", "-n", ns, "logs", pod, "--all-containers", "--prefix", "--tail=30")
		fmt.Fprintf(&b, "\nlogs of %s:\n%s", pod, logs)
	}
	return b.String()
}

// Tail is the last n bytes of s, marked as cut when they are not all of it.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// PodIPs maps the names of ns's running pods matching selector to their IPs.
func (k *Kube) PodIPs(ns, selector string) (map[string]string, error) {
	out, err := k.Run("", "-n", ns, "get", "pods", "-l", selector, "--field-selector=status.phase=Running", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.podIP}{"\n"}{end}`)
	if err != nil {
		return nil, err
	}
	ips := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			ips[f[0]] = f[1]
		}
	}
	return ips, nil
}
