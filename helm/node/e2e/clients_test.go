package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weighstation/weighstation/helm/node/clientreport"
	"github.com/weighstation/weighstation/helm/node/cluster"
	"github.com/weighstation/weighstation/helm/node/node"
)

// report is what a client pod prints when it is done.
type report = clientreport.Report

// clientPod is a client running as a pod of team-a.
type clientPod struct{ name string }

// startClient runs weighstation-k8s-client as the pod name in team-a with args (after --name).
func startClient(t *testing.T, name string, args ...string) clientPod {
	t.Helper()
	return startPod(t, name, append([]string{"/usr/local/bin/weighstation-k8s-client", "--name", name}, args...), nil)
}

// startPod runs command as the pod name in team-a, from the clients image, with env (NAME=value).
func startPod(t *testing.T, name string, command, env []string) clientPod {
	t.Helper()
	quote := func(xs []string) string {
		q := make([]string, len(xs))
		for i, x := range xs {
			q[i] = strconv.Quote(x)
		}
		return strings.Join(q, ", ")
	}
	var envs []string
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		envs = append(envs, fmt.Sprintf("{name: %s, value: %s}", strconv.Quote(k), strconv.Quote(v)))
	}
	if err := k.Apply("client-"+name+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %[1]s, namespace: %[2]s, labels: {app: client}}
spec:
  restartPolicy: Never
  securityContext: {runAsNonRoot: true, runAsUser: 1000}
  containers:
  - name: client
    image: %[3]s
    imagePullPolicy: IfNotPresent
    command: [%[4]s]
    env: [%[5]s]
`, name, cluster.TeamNS, im.Clients, quote(command), strings.Join(envs, ", ")), ""); err != nil {
		t.Fatal(err)
	}
	return clientPod{name: name}
}

// done waits for the pod to finish and returns its log; a pod that fails is reported with its
// events and log.
func (c clientPod) done(t *testing.T, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		phase, _ := k.Run("", "-n", cluster.TeamNS, "get", "pod", c.name, "-o", "jsonpath={.status.phase}")
		if phase == "Succeeded" {
			break
		}
		if phase == "Failed" || time.Now().After(deadline) {
			t.Fatalf("client %s: %s after %v%s", c.name, phase, timeout, k.Diagnose(cluster.TeamNS, "app=client"))
		}
		time.Sleep(time.Second)
	}
	logs := kubectl(t, "-n", cluster.TeamNS, "logs", c.name)
	kubectl(t, "-n", cluster.TeamNS, "delete", "pod", c.name, "--wait=false")
	return logs
}

// wait waits for weighstation-k8s-client to finish and returns its report.
func (c clientPod) wait(t *testing.T, timeout time.Duration) report {
	t.Helper()
	logs := c.done(t, timeout)
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	var r report
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("client %s's report: %v\n%s", c.name, err, logs)
	}
	return r
}

// learntOnlyTheGateway fails for an address a client was told that is not the gateway's: its
// Service name, or the NATS node port.
func learntOnlyTheGateway(t *testing.T, r report) {
	t.Helper()
	for _, a := range r.Learnt {
		host := strings.TrimPrefix(a, "nats://")
		if h, _, ok := strings.Cut(host, ":"); ok {
			host = h
		}
		if host != cluster.EnvoyHost() && host != cluster.EnvoySvc && host != node.NodeIP {
			t.Errorf("%s was told %s: not the gateway's Service or node port", r.Client, a)
		}
	}
}

var sampleLine = regexp.MustCompile(`^(\w+)\{([^}]*)\} ([0-9.e+]+)$`)

// envoyCounters scrapes every Envoy pod's metrics (from this machine: pod addresses are routed
// to the node) and returns name{protocol,tenant,reason} → value per pod.
func envoyCounters(t *testing.T, names ...string) map[string]map[string]float64 {
	t.Helper()
	out := map[string]map[string]float64{}
	for pod, ip := range podIPs(t, cluster.GatewayNS, cluster.EnvoyLabels) {
		resp, err := http.Get(fmt.Sprintf("http://%s:9102/stats/prometheus", ip))
		if err != nil {
			t.Fatalf("metrics of %s: %v", pod, err)
		}
		out[pod] = parseSamples(resp.Body, names)
		resp.Body.Close()
	}
	return out
}

func parseSamples(r io.Reader, names []string) map[string]float64 {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil || !want[m[1]] {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(m[2], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		v, _ := strconv.ParseFloat(m[3], 64)
		samples[fmt.Sprintf("%s{%s,%s}", m[1], labels["protocol"], labels["tenant"])] += v
	}
	return samples
}

// listenerConnections is the connections an Envoy pod's listener at address (0.0.0.0_4222) has
// accepted, from its metrics; -1 when they cannot be read.
func listenerConnections(ip, address string) float64 {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s:9102/stats/prometheus", ip))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	prefix := fmt.Sprintf(`envoy_listener_downstream_cx_total{envoy_listener_address="%s"} `, address)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}
