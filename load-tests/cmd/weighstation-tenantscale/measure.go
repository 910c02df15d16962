package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weighstation/weighstation/load-tests/internal/localstack"
)

// rung is one tenant count's figures.
type rung struct {
	source  string // files or kubernetes
	tenants int
	// kubernetes: how long kubectl apply of the N objects took, and from the control plane's
	// start to every object's conditions current (seen, every 10 s) and to the last object's
	// status written.
	created, conditionsDone, statusDone time.Duration
	start                               time.Duration
	// inForce is each timed change, from the write to the first refusal; acked each rewrite
	// back, from the write to the acknowledgement.
	inForce, acked []time.Duration
	// RSS in KiB: at the first acknowledgement, and the most after any change.
	envoyFirst, envoyMost int
	cpFirst, cpMost       int
}

// measured is the tenant whose policy changes; its NATS user is added to nats-server.
const measured = "t0"

// policy is tenant i's LimitPolicy at a rate of perSecond messages.
func policy(i, perSecond int) string {
	return fmt.Sprintf(`apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: t%[1]d }
spec:
  tenant: t%[1]d
  identify: { nats: { users: [t%[1]d] } }
  onLimit: reject
  limits:
    rate: { messagesPerSecond: %[2]d, burstMessages: %[2]d }
  overrides:
    - match: { nats: ["t%[1]d.orders.>"] }
      limits: { rate: { messagesPerSecond: 100 } }
`, i, perSecond)
}

const defaults = `apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata: { name: defaults }
spec:
  defaultTenant: anonymous
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata: { name: anonymous }
spec:
  tenant: anonymous
`

func writePolicies(n int) func(dir string) error {
	return func(dir string) error {
		if err := os.WriteFile(filepath.Join(dir, "defaults.yaml"), []byte(defaults), 0o644); err != nil {
			return err
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(dir, "t"+strconv.Itoa(i)+".yaml"), []byte(policy(i, 1000)), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

// source is where the stack's policies come from and how one changes: files (one per tenant
// in the stack's policy directory) or LimitPolicy objects of a real kube-apiserver.
type source interface {
	// change sets the measured tenant's rate; the time returned is when the change was made
	// (before the file write, at kubectl apply's return).
	change(st *localstack.Stack, perSecond int) (time.Time, error)
}

type files struct{}

func (files) change(st *localstack.Stack, perSecond int) (time.Time, error) {
	wrote := time.Now()
	return wrote, os.WriteFile(filepath.Join(st.PolicyDir(), measured+".yaml"), []byte(policy(0, perSecond)), 0o644)
}

func measure(root, kind string, n, changes int) (rung, error) {
	r := rung{source: kind, tenants: n}
	var (
		st   *localstack.Stack
		src  source
		kube *kubeSource
		err  error
	)
	if kind == "kubernetes" {
		if kube, err = startKube(root, n, &r); err != nil {
			return r, err
		}
		defer kube.stop()
		src = kube
		st, err = localstack.Start(root, func(string) error { return nil }, nil, "EXTRA_NATS_USERS="+measured,
			"POLICY_KUBECONFIG="+kube.api.Kubeconfig, "PLATFORM_NAMESPACE="+platformNS)
	} else {
		src = files{}
		st, err = localstack.Start(root, writePolicies(n), nil, "EXTRA_NATS_USERS="+measured)
	}
	if err != nil {
		return r, err
	}
	defer st.Stop()
	procs := st.Processes()
	up := time.Now()
	started, err := processStart(procs["envoy"])
	if err != nil {
		return r, err
	}
	r.start = up.Sub(started)
	r.envoyFirst, r.cpFirst = rssKiB(procs["envoy"]), rssKiB(procs["control-plane"])
	r.envoyMost, r.cpMost = r.envoyFirst, r.cpFirst

	refusals := make(chan time.Time, 1024)
	nc, err := nats.Connect("nats://"+st.Addr("NATS_PORT"), nats.UserInfo(measured, measured+"-secret"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, _ error) {
			select {
			case refusals <- time.Now():
			default:
			}
		}))
	if err != nil {
		return r, err
	}
	defer nc.Close()
	stop := make(chan struct{})
	defer close(stop)
	go publish(nc, stop)
	for range changes {
		version, err := st.AckedVersion()
		if err != nil {
			return r, err
		}
		drain(refusals)
		wrote, err := src.change(st, 1)
		if err != nil {
			return r, err
		}
		select {
		case at := <-refusals:
			r.inForce = append(r.inForce, at.Sub(wrote))
		case <-time.After(time.Minute):
			return r, fmt.Errorf("the change was not in force a minute after it was made")
		}
		r.sampleRSS(procs)
		if err := st.WaitAcked(context.Background(), version, time.Minute); err != nil {
			return r, err
		}
		version, _ = st.AckedVersion()
		wrote, err = src.change(st, 1000)
		if err != nil {
			return r, err
		}
		if err := st.WaitAcked(context.Background(), version, time.Minute); err != nil {
			return r, err
		}
		r.acked = append(r.acked, time.Since(wrote))
		r.sampleRSS(procs)
	}
	if kube != nil {
		cpStart, err := processStart(procs["control-plane"])
		if err != nil {
			return r, err
		}
		if r.conditionsDone, r.statusDone, err = kube.statusWritten(cpStart, n); err != nil {
			return r, err
		}
		r.sampleRSS(procs)
	}
	return r, nil
}

// publish sends 500 messages a second of the measured tenant until stop.
func publish(nc *nats.Conn, stop <-chan struct{}) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	payload := make([]byte, 100)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			_ = nc.Publish(measured+".events", payload)
		}
	}
}

func drain(c chan time.Time) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func (r *rung) sampleRSS(procs map[string]int) {
	envoy, cp := rssKiB(procs["envoy"]), rssKiB(procs["control-plane"])
	r.envoyMost = max(r.envoyMost, envoy)
	r.cpMost = max(r.cpMost, cp)
	fmt.Fprintf(os.Stderr, "    RSS: Envoy %d MiB, control plane %d MiB\n", envoy/1024, cp/1024)
}

func rssKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// processStart is when a process started: its start time in clock ticks after boot (field 22
// of /proc/<pid>/stat) from the boot time in /proc/stat.
func processStart(pid int) (time.Time, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ticks, err := strconv.ParseInt(f[19], 10, 64) // field 22 counts from the pid, 2 before ')'
	if err != nil {
		return time.Time{}, err
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for _, l := range strings.Split(string(stat), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "btime" {
			boot, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			const hz = 100 // USER_HZ on Linux
			return time.Unix(boot, 0).Add(time.Duration(ticks) * time.Second / hz), nil
		}
	}
	return time.Time{}, fmt.Errorf("no btime in /proc/stat")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
