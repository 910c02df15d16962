// Command weighstation-k8s-node runs a single-node Kubernetes cluster on this machine (package
// node): `run` starts it in a network namespace of its own and stops it all on Ctrl-C;
// `supervise` is what runs inside that namespace.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/weighstation/weighstation/helm/node/cluster"
	"github.com/weighstation/weighstation/helm/node/node"
)

const usage = `usage:
  weighstation-k8s-node run --dir DIR [--root REPO] [flags]  start the node (with --root: the brokers, the
                                                             chart and team-a, as the quick start), print
                                                             how to reach it, stop it all on Ctrl-C
  weighstation-k8s-node supervise --dir DIR [flags]          (inside the node's namespace; run starts it)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(os.Args[2:])
	case "supervise":
		err = superviseCmd(os.Args[2:])
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-k8s-node:", err)
		os.Exit(1)
	}
}

// flags are shared by run and supervise: run passes them on.
type flags struct {
	dir, k8sBin, nodeBin, images, pause, coredns string
	root, topology                               string
	networkPolicy                                bool
}

func parse(name string, args []string) (flags, *flag.FlagSet, error) {
	var f flags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.dir, "dir", "", "the node's directory (certificates, configuration, logs, etcd, containerd)")
	fs.StringVar(&f.k8sBin, "k8s-bin", "", "directory of etcd and the Kubernetes binaries: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl (.tools/k8s/bin)")
	fs.StringVar(&f.nodeBin, "node-bin", "", "directory of the node's other programs: weighstation-netpol, for --network-policy (.tools/k8s/node-bin)")
	fs.StringVar(&f.images, "images", "", "comma-separated OCI layouts to import into containerd, each LAYOUT=NAME (the repository of its references)")
	fs.StringVar(&f.pause, "pause-image", "weighstation.local/pause:1", "the pod sandbox image (imported, never pulled)")
	fs.StringVar(&f.coredns, "coredns-image", "weighstation.local/coredns:1.15.0", "CoreDNS's image (imported, never pulled)")
	fs.BoolVar(&f.networkPolicy, "network-policy", false, "enforce NetworkPolicy (kube-network-policies: NODE-BIN/weighstation-netpol)")
	fs.StringVar(&f.root, "root", "", "run: the repository; its images (make image node-images) are imported and the quick start's setup runs")
	fs.StringVar(&f.topology, "topology", "full", "run --root: full (3 nats-servers, 3 brokers, 3 Envoys) or smoke (1, 1, 2)")
	if err := fs.Parse(args); err != nil {
		return f, fs, err
	}
	if f.dir == "" || f.k8sBin == "" || (f.networkPolicy && f.nodeBin == "") {
		return f, fs, fmt.Errorf("%s needs --dir and --k8s-bin (and --node-bin with --network-policy)\n%s", name, usage)
	}
	abs, err := filepath.Abs(f.dir)
	f.dir = abs
	return f, fs, err
}

func superviseCmd(args []string) error {
	f, _, err := parse("supervise", args)
	if err != nil {
		return err
	}
	var layouts []string
	if f.images != "" {
		layouts = strings.Split(f.images, ",")
	}
	netpol := ""
	if f.networkPolicy {
		netpol = filepath.Join(f.nodeBin, "weighstation-netpol")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return node.Supervise(ctx, node.SuperviseOptions{
		Dirs: node.Dirs{Root: f.dir},
		Binaries: node.Binaries{
			Etcd: filepath.Join(f.k8sBin, "etcd"), APIServer: filepath.Join(f.k8sBin, "kube-apiserver"),
			Kubectl:           filepath.Join(f.k8sBin, "kubectl"),
			ControllerManager: filepath.Join(f.k8sBin, "kube-controller-manager"),
			Scheduler:         filepath.Join(f.k8sBin, "kube-scheduler"),
			Kubelet:           filepath.Join(f.k8sBin, "kubelet"), KubeProxy: filepath.Join(f.k8sBin, "kube-proxy"),
			Containerd: "/usr/bin/containerd", Ctr: "/usr/bin/ctr", CNIDir: "/usr/lib/cni",
			NetworkPolicy: netpol,
		},
		Images:  node.Images{Pause: f.pause, CoreDNS: f.coredns},
		Layouts: layouts,
	})
}

func runCmd(args []string) error {
	f, _, err := parse("run", args)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var im cluster.Images
	topology := cluster.Full
	if f.topology == "smoke" {
		topology = cluster.Smoke
	}
	if f.root != "" {
		if im, err = cluster.ImagesIn(f.root); err != nil {
			return err
		}
		args = append(args, "--images", strings.Join(im.Layouts, ","), "--pause-image", im.Pause, "--coredns-image", im.CoreDNS)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	begin := time.Now()
	n, err := node.Start(ctx, node.Dirs{Root: f.dir}, self, args, 10*time.Minute)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping the node")
		n.Stop()
		if left := n.Leftovers(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "left behind:\n  %s\n", strings.Join(left, "\n  "))
		}
	}()
	fmt.Printf("node %s ready in %.0fs; logs in %s\n", n.ID, time.Since(begin).Seconds(), n.Dirs.Logs())
	manifests := filepath.Join(f.dir, "manifests")
	fmt.Printf("export KUBECONFIG=%s MANIFESTS=%s\n", n.Dirs.Kubeconfig(), manifests)
	if f.root != "" {
		k := &cluster.Kube{Kubeconfig: n.Dirs.Kubeconfig(), Kubectl: filepath.Join(f.k8sBin, "kubectl"),
			Helm: filepath.Join(f.root, ".tools", "bin", "helm"), Root: f.root, Manifests: manifests, Log: os.Stdout}
		if _, err := k.Setup(filepath.Join(f.root, "helm", "weighstation"), topology, im, os.Stdout); err != nil {
			return err
		}
		fmt.Printf(`
The gateway: NATS at nats://%[1]s:%[2]d from this machine (user orders: %[3]d/s on each Envoy
pod, refused above; user payments), or nats://%[4]s:4222 from pods; Kafka at %[4]s:9092 from
pods (client ids orders-… and payments-…). Pods and Services are routed from this machine
(%[5]s, %[6]s); the cluster's DNS answers at %[7]s.
Ctrl-C stops it all.
`, node.NodeIP, cluster.NATSNodePort, cluster.OrdersRate, cluster.EnvoyHost(), node.ClusterCIDR, node.ServiceCIDR, node.DNSServiceIP)
	}
	<-ctx.Done()
	return nil
}
