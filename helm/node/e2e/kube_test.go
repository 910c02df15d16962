package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// kube runs kubectl and helm against the node, as a user would.
type kube struct{ kubeconfig, bin, helm string }

// kubectl runs kubectl with args (stdin if not empty) and returns its output.
func (k *kube) kubectl(stdin string, args ...string) (string, error) {
	cmd := exec.Command(k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

func (k *kube) must(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := k.kubectl(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (k *kube) apply(t *testing.T, manifest string) {
	t.Helper()
	k.must(t, manifest, "apply", "-f", "-")
}

// runHelm runs helm with the node's kubeconfig.
func (k *kube) runHelm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(k.helm, append(args, "--kubeconfig", k.kubeconfig)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitReady waits until every pod of ns matching selector (at least want) is Ready. A pod that
// does not get there is reported with its events and its containers' logs, never as a bare
// timeout.
func (k *kube) waitReady(t *testing.T, ns, selector string, want int, timeout time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	for {
		out, err := k.kubectl("", "-n", ns, "get", "pods", "-l", selector, "-o",
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
			return time.Since(begin)
		}
		if time.Since(begin) > timeout {
			t.Fatalf("%d of %d pods %s in %s Ready after %v (want %d)%s", ready, total, selector, ns, timeout, want, k.diagnose(ns, selector))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// diagnose is what a user would look at: the pods, their events and their containers' logs.
func (k *kube) diagnose(ns, selector string) string {
	var b strings.Builder
	pods, _ := k.kubectl("", "-n", ns, "get", "pods", "-l", selector, "-o", "wide")
	fmt.Fprintf(&b, "\n%s", pods)
	events, _ := k.kubectl("", "-n", ns, "get", "events", "--sort-by=.lastTimestamp")
	fmt.Fprintf(&b, "\nevents in %s:\n%s", ns, tail(events, 4000))
	names, _ := k.kubectl("", "-n", ns, "get", "pods", "-l", selector, "-o", "name")
	for _, pod := range strings.Fields(names) {
		logs, _ := k.kubectl("", "-n", ns, "logs", pod, "--all-containers", "--prefix", "--tail=30")
		fmt.Fprintf(&b, "\nlogs of %s:\n%s", pod, logs)
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// podIPs maps the names of ns's pods matching selector to their IPs.
func (k *kube) podIPs(t *testing.T, ns, selector string) map[string]string {
	t.Helper()
	out := k.must(t, "", "-n", ns, "get", "pods", "-l", selector, "--field-selector=status.phase=Running", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.podIP}{"\n"}{end}`)
	ips := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			ips[f[0]] = f[1]
		}
	}
	return ips
}

func parseIP(s string) net.IP { return net.ParseIP(s) }

func itoa(i int) string { return strconv.Itoa(i) }
