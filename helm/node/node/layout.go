// Package node runs a single-node Kubernetes cluster on this machine for the chart's tests and
// `make run-k8s`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd with
// runc, kubelet, the CNI bridge, kube-proxy (iptables) and CoreDNS, all in a network namespace
// of their own (so their iptables rules, bridge and pod networks live and die with it) and one
// private mount namespace (so every mount they make vanishes with the last of their processes).
package node

import (
	"fmt"
	"path/filepath"
)

// Addresses, all in 198.18.0.0/15 (RFC 2544, reserved for benchmarking): no private range is
// used, and nothing routes them off this machine.
const (
	// PodCIDR is the node's pods, on the CNI bridge; ClusterCIDR the cluster's.
	PodCIDR     = "198.18.0.0/24"
	PodGateway  = "198.18.0.1"
	ClusterCIDR = "198.18.0.0/16"
	// ServiceCIDR holds the Services' cluster IPs: the API server's is the first, DNS the tenth.
	ServiceCIDR  = "198.19.0.0/20"
	APIServiceIP = "198.19.0.1"
	DNSServiceIP = "198.19.0.10"
	// The link between this machine's namespace (HostIP) and the node's (NodeIP).
	HostIP   = "198.19.255.1"
	NodeIP   = "198.19.255.2"
	LinkBits = 30
	// NodeName is the node's name in the API.
	NodeName = "weighstation-node"
	// APIPort is the API server's port on NodeIP. Inside its own namespace the node can use
	// fixed ports: nothing else listens there.
	APIPort = 6443
)

// Dirs are a node's files, under one directory of the caller's (a test's temporary directory).
type Dirs struct{ Root string }

func (d Dirs) PKI() string        { return filepath.Join(d.Root, "pki") }
func (d Dirs) Logs() string       { return filepath.Join(d.Root, "logs") }
func (d Dirs) Config() string     { return filepath.Join(d.Root, "config") }
func (d Dirs) Etcd() string       { return filepath.Join(d.Root, "etcd") }
func (d Dirs) Containerd() string { return filepath.Join(d.Root, "containerd") }
func (d Dirs) ContainerdSocket() string {
	return filepath.Join(d.Root, "containerd", "containerd.sock")
}
func (d Dirs) Kubeconfig() string        { return filepath.Join(d.Root, "kubeconfig") }
func (d Dirs) ReadyFile() string         { return filepath.Join(d.Root, "ready") }
func (d Dirs) SupervisorPIDFile() string { return filepath.Join(d.Root, "supervisor.pid") }
func (d Dirs) Log(name string) string    { return filepath.Join(d.Logs(), name+".log") }

// APIServer is the API server's URL, reachable from this machine's namespace and the node's.
func APIServer() string { return fmt.Sprintf("https://%s:%d", NodeIP, APIPort) }

// Namespace is the name of the node's network namespace (`ip netns`), by the run's id.
func Namespace(id string) string { return "wsnode-" + id }

// hostVeth is this machine's end of the link to the node's namespace (at most 15 bytes).
func hostVeth(id string) string { return "wsn-" + id }
