package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Node is a running node, seen from this machine's namespaces.
type Node struct {
	ID   string
	Dirs Dirs
	cmd  *exec.Cmd
	done chan struct{}
	// before is the machine as it was, to tell what the node left behind.
	before machineState
}

// Start makes the node's network namespace and its link to this machine, runs the supervisor
// (`weighstation-k8s-node supervise`, with args) inside it, and waits until it reports the
// node ready. On any error the node is stopped and its namespace removed.
func Start(ctx context.Context, d Dirs, supervisor string, args []string, timeout time.Duration) (*Node, error) {
	id := make([]byte, 3)
	_, _ = rand.Read(id)
	n := &Node{ID: hex.EncodeToString(id), Dirs: d, before: observe(d)}
	if err := os.MkdirAll(d.Logs(), 0o755); err != nil {
		return nil, err
	}
	ns, veth := Namespace(n.ID), hostVeth(n.ID)
	for _, c := range [][]string{
		{"netns", "add", ns},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"addr", "add", fmt.Sprintf("%s/%d", HostIP, LinkBits), "dev", veth},
		{"link", "set", veth, "up"},
		{"-n", ns, "addr", "add", fmt.Sprintf("%s/%d", NodeIP, LinkBits), "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		// This machine reaches pods and Services through the node. The node has no default
		// route: nothing in it can send a packet anywhere but here.
		{"route", "add", ClusterCIDR, "via", NodeIP},
		{"route", "add", ServiceCIDR, "via", NodeIP},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			n.removeNamespace()
			return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
	log, err := os.Create(d.Log("supervisor"))
	if err != nil {
		n.removeNamespace()
		return nil, err
	}
	// `ip netns exec` enters the namespace, gives the command a mount namespace of its own
	// (mounts made in it do not reach this machine's) and execs it: its PID is the supervisor's.
	n.cmd = exec.Command("ip", append([]string{"netns", "exec", ns, supervisor, "supervise"}, args...)...)
	n.cmd.Stdout, n.cmd.Stderr = log, log
	n.cmd.Env = append(os.Environ(), HostNamespacesEnv+"="+hostNamespaces())
	if err := n.cmd.Start(); err != nil {
		log.Close()
		n.removeNamespace()
		return nil, err
	}
	n.done = make(chan struct{})
	go func() { _ = n.cmd.Wait(); log.Close(); close(n.done) }()
	_ = os.WriteFile(d.SupervisorPIDFile(), []byte(strconv.Itoa(n.cmd.Process.Pid)), 0o644)

	deadline := time.After(timeout)
	for {
		if _, err := os.Stat(d.ReadyFile()); err == nil {
			return n, nil
		}
		select {
		case <-n.done:
			out, _ := os.ReadFile(d.Log("supervisor"))
			n.Stop()
			return nil, fmt.Errorf("the node did not start:\n%s", out)
		case <-ctx.Done():
			n.Stop()
			return nil, ctx.Err()
		case <-deadline:
			out, _ := os.ReadFile(d.Log("supervisor"))
			n.Stop()
			return nil, fmt.Errorf("the node was not ready after %v:\n%s", timeout, out)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop ends the supervisor by its PID (it stops every process it started, by PID), then kills
// by PID whatever is still in the node's network namespace, and removes the namespace, the link
// and the directories the node made at fixed paths.
func (n *Node) Stop() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.done:
		case <-time.After(2 * time.Minute):
			_ = n.cmd.Process.Kill()
			<-n.done
		}
	}
	for _, pid := range n.processesInNamespace() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	n.removeNamespace()
	for _, p := range privatePaths {
		if !n.before.paths[p] {
			_ = os.Remove(p) // empty: its tmpfs was the node's
		}
	}
}

func (n *Node) removeNamespace() {
	_ = exec.Command("ip", "netns", "delete", Namespace(n.ID)).Run()
	_ = exec.Command("ip", "link", "delete", hostVeth(n.ID)).Run()
}

// processesInNamespace lists the processes whose network namespace is the node's.
func (n *Node) processesInNamespace() []int {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join("/run/netns", Namespace(n.ID)), &st); err != nil {
		return nil
	}
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var ps syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &ps) == nil && ps.Ino == st.Ino && ps.Dev == st.Dev {
			out = append(out, pid)
		}
	}
	return out
}

// machineState is what a node could leave behind on this machine.
type machineState struct {
	netns, links, mounts, iptables map[string]bool
	cgroups                        map[string]bool
	paths                          map[string]bool
}

func observe(d Dirs) machineState {
	lines := func(name string, args ...string) map[string]bool {
		out, _ := exec.Command(name, args...).Output()
		set := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				set[l] = true
			}
		}
		return set
	}
	s := machineState{
		netns:    lines("ip", "netns", "list"),
		links:    map[string]bool{},
		mounts:   map[string]bool{},
		iptables: map[string]bool{},
		cgroups:  cgroupDirs(),
		paths:    map[string]bool{},
	}
	for l := range lines("ip", "-o", "link", "show") {
		if f := strings.Fields(l); len(f) > 1 {
			s.links[strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":")] = true
		}
	}
	mountinfo, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mountinfo), "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			s.mounts[f[4]] = true
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		for l := range lines(save) {
			if strings.Contains(l, "KUBE-") || strings.Contains(l, "CNI-") {
				s.iptables[save+": "+l] = true
			}
		}
	}
	for _, p := range privatePaths {
		if _, err := os.Stat(p); err == nil {
			s.paths[p] = true
		}
	}
	return s
}

// Leftovers is what the node left on this machine after Stop: network namespaces, links,
// mounts, iptables rules, cgroups, directories at fixed paths, and processes running from its
// directory. A clean run leaves none.
func (n *Node) Leftovers() []string {
	now := observe(n.Dirs)
	var out []string
	diff := func(what string, before, after map[string]bool) {
		for k := range after {
			if !before[k] {
				out = append(out, what+" "+k)
			}
		}
	}
	diff("network namespace", n.before.netns, now.netns)
	diff("link", n.before.links, now.links)
	diff("mount", n.before.mounts, now.mounts)
	diff("iptables", n.before.iptables, now.iptables)
	diff("cgroup", n.before.cgroups, now.cgroups)
	diff("directory", n.before.paths, now.paths)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		// Processes only (not /proc/self), and not this one, which was given the directory.
		if pid, err := strconv.Atoi(e.Name()); err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(n.Dirs.Root)) {
			out = append(out, "process "+e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}
