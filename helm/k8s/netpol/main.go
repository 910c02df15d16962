// Command weighstation-netpol enforces NetworkPolicy on the test node (make test-k8s-node) with
// SIG Network's kube-network-policies controller, run as a process of the node with a kubeconfig
// (upstream's own command reads only an in-cluster config). The controller gives a verdict for
// each new connection it is handed on its netfilter queue; on this machine's kernel (no nftables
// `queue` expression) the node's supervisor hands them over with iptables NFQUEUE rules instead
// of the controller's own nftables table, whose setup fails and is retried harmlessly.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the node's kubeconfig")
	nodeName := flag.String("node-name", "", "the node's name: the pods it enforces for")
	queue := flag.Int("nfqueue-id", 100, "the netfilter queue the node hands new connections to")
	flag.Parse()
	if *kubeconfig == "" || *nodeName == "" {
		fmt.Fprintln(os.Stderr, "weighstation-netpol: --kubeconfig and --node-name are required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *nodeName, *queue); err != nil {
		fmt.Fprintln(os.Stderr, "weighstation-netpol:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, nodeName string, queue int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	// NetworkPolicy only (no AdminNetworkPolicy), and no DNS workaround: this kernel (6.12+) has
	// the conntrack fix. NRI stays enabled although containerd 1.6 has none (its plugin fails to
	// connect, logs it, and pod addresses come from the API): v0.8.0 dereferences the absent
	// plugin for an address no pod has when NRI is disabled.
	ctrl, err := networkpolicy.NewController(client,
		factory.Networking().V1().NetworkPolicies(), factory.Core().V1().Namespaces(), factory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{QueueID: queue, NodeName: nodeName, NetfilterBug1766Fix: false})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	factory.Start(ctx.Done())
	select {
	case <-ctx.Done():
		return nil
	case err := <-done:
		return fmt.Errorf("the controller stopped: %w", err)
	}
}
