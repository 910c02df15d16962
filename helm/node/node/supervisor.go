package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Binaries are the programs a node runs.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Scheduler, Kubelet, KubeProxy, Kubectl string
	Containerd, Ctr                                                            string // Debian's containerd 1.6 (runc is found by its shim on PATH)
	CNIDir                                                                     string // the CNI plugins (bridge, host-local, loopback, portmap)
	// NetworkPolicy is the enforcer (helm/k8s/netpol); empty: NetworkPolicies are stored, not
	// enforced, as on a cluster whose CNI ignores them.
	NetworkPolicy string
}

// SuperviseOptions are what Supervise needs: where its files go, what it runs, and the images'
// OCI layouts (LAYOUT=NAME) to import into containerd before the kubelet starts.
type SuperviseOptions struct {
	Dirs     Dirs
	Binaries Binaries
	Images   Images
	Layouts  []string
}

// privatePaths are where containerd, runc, CNI and the kubelet keep state at fixed paths. Each
// gets a tmpfs of the node's mount namespace, so their state vanishes with it and never mixes
// with the machine's.
var privatePaths = []string{"/run/containerd", "/run/netns", "/var/lib/cni", "/var/lib/kubelet", "/var/log/pods", "/var/log/containers"}

// Supervise runs the node in the current network and mount namespaces (which must not be the
// machine's: run it under `ip netns exec`, as Start does), writes Dirs.ReadyFile() once the node
// is Ready with CoreDNS answering, and stops everything it started when ctx ends.
func Supervise(ctx context.Context, o SuperviseOptions) (err error) {
	if err := mustBeIsolated(); err != nil {
		return err
	}
	if err := becomeSubreaper(); err != nil {
		return err
	}
	if err := mountCgroups(); err != nil {
		return err
	}
	d := o.Dirs
	for _, dir := range []string{d.Logs(), d.Config(), d.Etcd(), d.Containerd()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	for _, p := range privatePaths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount("tmpfs", p, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("tmpfs on %s: %w", p, err)
		}
	}
	for key, value := range map[string]string{"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"} {
		if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s: %w", key, err)
		}
	}
	cgroupsBefore := cgroupDirs()

	var started []*process
	defer func() {
		stopAll(started)
		if leftover := removeNewCgroups(cgroupsBefore); leftover != nil && err == nil {
			err = leftover
		}
	}()
	run := func(name, bin string, args ...string) error {
		p, err := startProcess(d.Logs(), name, bin, args...)
		if err != nil {
			return err
		}
		started = append(started, p)
		return nil
	}

	pki, err := writePKI(d.PKI())
	if err != nil {
		return err
	}
	if err := os.WriteFile(d.Kubeconfig(), pki.Kubeconfig(), 0o600); err != nil {
		return err
	}
	cfg, err := writeConfigs(d, o.Images, o.Binaries.CNIDir)
	if err != nil {
		return err
	}
	b := o.Binaries
	step := func(what string, f func() error) error {
		begin := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w%s", what, err, logTails(d, started))
		}
		fmt.Printf("node: %s (%.1fs)\n", what, time.Since(begin).Seconds())
		return nil
	}

	if err := step("etcd and kube-apiserver ready", func() error {
		if err := run("etcd", b.Etcd, "--data-dir", d.Etcd(), "--unsafe-no-fsync",
			"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
			"--listen-peer-urls", "http://127.0.0.1:2380", "--log-level", "warn"); err != nil {
			return err
		}
		if err := run("kube-apiserver", b.APIServer,
			"--etcd-servers", "http://127.0.0.1:2379",
			"--bind-address", "0.0.0.0", "--advertise-address", NodeIP, "--secure-port", fmt.Sprint(APIPort),
			"--service-cluster-ip-range", ServiceCIDR,
			"--client-ca-file", pki.CA, "--tls-cert-file", pki.APIServer, "--tls-private-key-file", Key(pki.APIServer),
			"--kubelet-client-certificate", pki.Admin, "--kubelet-client-key", Key(pki.Admin),
			// The node's name resolves nowhere (no DNS outside the cluster): logs and exec go to
			// its address.
			"--kubelet-preferred-address-types", "InternalIP",
			"--service-account-key-file", pki.ServiceAccountKey, "--service-account-signing-key-file", pki.ServiceAccountKey,
			"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
			"--authorization-mode", "Node,RBAC", "--enable-priority-and-fairness=false"); err != nil {
			return err
		}
		return waitHTTP(ctx, pki, APIServer()+"/readyz", 90*time.Second, started)
	}); err != nil {
		return err
	}

	if err := step("controller-manager, scheduler and containerd started; images imported", func() error {
		if err := run("kube-controller-manager", b.ControllerManager, "--kubeconfig", d.Kubeconfig(),
			"--authentication-kubeconfig", d.Kubeconfig(), "--authorization-kubeconfig", d.Kubeconfig(),
			"--leader-elect=false", "--use-service-account-credentials",
			"--service-account-private-key-file", pki.ServiceAccountKey, "--root-ca-file", pki.CA,
			"--allocate-node-cidrs", "--cluster-cidr", ClusterCIDR, "--node-cidr-mask-size", "24",
			"--service-cluster-ip-range", ServiceCIDR, "--bind-address", "127.0.0.1"); err != nil {
			return err
		}
		if err := run("kube-scheduler", b.Scheduler, "--kubeconfig", d.Kubeconfig(),
			"--authentication-kubeconfig", d.Kubeconfig(), "--authorization-kubeconfig", d.Kubeconfig(),
			"--leader-elect=false", "--bind-address", "127.0.0.1"); err != nil {
			return err
		}
		if err := run("containerd", b.Containerd, "--config", cfg.containerd); err != nil {
			return err
		}
		if err := waitFor(ctx, 30*time.Second, started, func() error {
			return exec.Command(b.Ctr, "--address", d.ContainerdSocket(), "version").Run()
		}); err != nil {
			return fmt.Errorf("containerd does not answer: %w", err)
		}
		for _, spec := range o.Layouts {
			if err := importLayout(b.Ctr, d.ContainerdSocket(), d.Containerd(), spec); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}

	if err := step("kubelet and kube-proxy started; node Ready", func() error {
		if err := run("kubelet", b.Kubelet, "--config", cfg.kubelet, "--kubeconfig", d.Kubeconfig(),
			"--hostname-override", NodeName, "--node-ip", NodeIP); err != nil {
			return err
		}
		if err := run("kube-proxy", b.KubeProxy, "--config", cfg.kubeProxy); err != nil {
			return err
		}
		if b.NetworkPolicy != "" {
			if err := addNetworkPolicyRules(); err != nil {
				return err
			}
			if err := run("network-policy", b.NetworkPolicy, "--kubeconfig", d.Kubeconfig(), "--node-name", NodeName,
				"--nfqueue-id", fmt.Sprint(netpolQueue)); err != nil {
				return err
			}
		}
		return waitFor(ctx, 90*time.Second, started, func() error {
			out, err := kubectl(b.Kubectl, d, "get", "node", NodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			if err != nil || strings.TrimSpace(out) != "True" {
				return fmt.Errorf("node not Ready (%q): %v", out, err)
			}
			return nil
		})
	}); err != nil {
		return err
	}

	if err := step("CoreDNS ready", func() error {
		manifest := filepath.Join(d.Config(), "coredns.yaml")
		if err := os.WriteFile(manifest, []byte(coreDNSManifest(o.Images.CoreDNS)), 0o644); err != nil {
			return err
		}
		if out, err := kubectl(b.Kubectl, d, "apply", "-f", manifest); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return waitFor(ctx, 120*time.Second, started, func() error {
			out, err := kubectl(b.Kubectl, d, "-n", "kube-system", "get", "deployment", "coredns", "-o", "jsonpath={.status.readyReplicas}")
			if err != nil || strings.TrimSpace(out) != "1" {
				return fmt.Errorf("coredns not ready (%q): %v", out, err)
			}
			return nil
		})
	}); err != nil {
		return err
	}

	if err := os.WriteFile(d.ReadyFile(), []byte(APIServer()+"\n"), 0o644); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case <-anyExited(started):
		return fmt.Errorf("a node process exited%s", logTails(d, started))
	}
}

// stopAll stops the node: the kubelet and kube-proxy first (nothing restarts a container then),
// every container with its shim by PID, then containerd and the control plane in reverse order.
func stopAll(started []*process) {
	keep := map[int]bool{}
	for _, p := range started {
		keep[p.cmd.Process.Pid] = true
	}
	for _, p := range started {
		if p.name == "kubelet" || p.name == "kube-proxy" {
			p.stop(10 * time.Second)
		}
	}
	killDescendants(keep)
	for i := len(started) - 1; i >= 0; i-- {
		started[i].stop(10 * time.Second)
	}
	killDescendants(nil)
}

// HostNamespacesEnv carries the launcher's network and mount namespaces to the supervisor,
// which refuses to run in either (PID 1's may not be readable in a sandbox).
const HostNamespacesEnv = "WEIGHSTATION_NODE_HOST_NAMESPACES"

// hostNamespaces names this process's network and mount namespaces.
func hostNamespaces() string {
	net, _ := os.Readlink("/proc/self/ns/net")
	mnt, _ := os.Readlink("/proc/self/ns/mnt")
	return net + "," + mnt
}

// mustBeIsolated refuses to run in the machine's own network or mount namespace.
func mustBeIsolated() error {
	host := os.Getenv(HostNamespacesEnv)
	if host == "" {
		return fmt.Errorf("%s is not set: start the node with `weighstation-k8s-node run` (node.Start)", HostNamespacesEnv)
	}
	hostNet, hostMnt, _ := strings.Cut(host, ",")
	self := strings.Split(hostNamespaces(), ",")
	if self[0] == hostNet || self[1] == hostMnt {
		return errors.New("the node must run in network and mount namespaces of its own (under `ip netns exec`), not the machine's")
	}
	return nil
}

func kubectl(bin string, d Dirs, args ...string) (string, error) {
	out, err := exec.Command(bin, append([]string{"--kubeconfig", d.Kubeconfig()}, args...)...).CombinedOutput()
	return string(out), err
}

// waitFor retries f until it succeeds, ctx ends, the timeout passes or a node process exits.
func waitFor(ctx context.Context, timeout time.Duration, started []*process, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		for _, p := range started {
			if p.exited() {
				return fmt.Errorf("%s exited (%v)", p.name, p.cmd.ProcessState)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func waitHTTP(ctx context.Context, pki *PKI, url string, timeout time.Duration, started []*process) error {
	client, err := pki.client()
	if err != nil {
		return err
	}
	return waitFor(ctx, timeout, started, func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
}

func (p *PKI) client() (*http.Client, error) {
	cert, err := tls.X509KeyPair(p.adminPEM, p.adminKeyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
	}}, nil
}

func anyExited(ps []*process) <-chan struct{} {
	out := make(chan struct{})
	var once sync.Once
	for _, p := range ps {
		go func() { <-p.done; once.Do(func() { close(out) }) }()
	}
	return out
}

// logTails is the end of every started process's log, for an error that names what failed.
func logTails(d Dirs, started []*process) string {
	var b strings.Builder
	for _, p := range started {
		log, _ := os.ReadFile(d.Log(p.name))
		if len(log) > 1500 {
			log = log[len(log)-1500:]
		}
		fmt.Fprintf(&b, "\n--- %s (%s):\n%s", p.name, d.Log(p.name), log)
	}
	return b.String()
}
