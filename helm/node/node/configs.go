package node

import (
	"fmt"
	"os"
	"path/filepath"
)

// Images names the images the node runs itself (the pod sandbox, CoreDNS); the chart's and the
// brokers' images are the caller's.
type Images struct {
	Pause, CoreDNS string
}

// writeConfigs writes containerd's, the CNI network's, the kubelet's and kube-proxy's
// configuration files, and returns their paths.
func writeConfigs(d Dirs, images Images, cniBin string) (configs, error) {
	c := configs{
		containerd: filepath.Join(d.Config(), "containerd.toml"),
		cniConfDir: filepath.Join(d.Config(), "cni"),
		kubelet:    filepath.Join(d.Config(), "kubelet.yaml"),
		kubeProxy:  filepath.Join(d.Config(), "kube-proxy.yaml"),
		resolvConf: filepath.Join(d.Config(), "resolv.conf"),
	}
	if err := os.MkdirAll(c.cniConfDir, 0o755); err != nil {
		return c, err
	}
	files := map[string]string{
		c.containerd: containerdConfig(d, images.Pause, cniBin, c.cniConfDir),
		filepath.Join(c.cniConfDir, "10-weighstation-node.conflist"): cniConfig,
		c.kubelet:   kubeletConfig(d, c.resolvConf),
		c.kubeProxy: kubeProxyConfig(d),
		// Pods of dnsPolicy Default (CoreDNS) resolve against this: the machine's end of the
		// node's link, where nothing answers, so no name is ever looked up off this machine.
		c.resolvConf: "nameserver " + HostIP + "\n",
	}
	for path, body := range files {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return c, err
		}
	}
	return c, nil
}

type configs struct {
	containerd, cniConfDir, kubelet, kubeProxy, resolvConf string
}

// containerdConfig: containerd 1.6's CRI with runc under cgroupfs. restrict_oom_score_adj
// because writing a negative oom_score_adj is denied on this kind of machine (runc then fails
// every sandbox with "can't get final child's PID from pipe: EOF"); the sandbox image is ours
// since no registry can be reached.
func containerdConfig(d Dirs, pause, cniBin, cniConfDir string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`, filepath.Join(d.Containerd(), "root"), filepath.Join(d.Containerd(), "state"), d.ContainerdSocket(),
		d.ContainerdSocket()+".ttrpc", filepath.Join(d.Containerd(), "opt"), pause, cniBin, cniConfDir)
}

// cniConfig: pods on a bridge in the node's namespace, addressed by host-local from PodCIDR.
// No masquerade: nothing leaves the machine; kube-proxy masquerades what needs it.
var cniConfig = fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "weighstation-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, PodCIDR, PodGateway)

// kubeletConfig: what the kubelet needs on this kind of machine (cgroup v1 hybrid, cgroupfs, no
// per-QoS cgroups, swap on the host), the kubelet's API for the API server only (logs, exec),
// and no eviction: a test's pods must not be evicted for the disk the machine's other work fills.
func kubeletConfig(d Dirs, resolvConf string) string {
	pki := d.PKI()
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %[2]s
tlsPrivateKeyFile: %[3]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[4]s}
authorization:
  mode: AlwaysAllow
clusterDNS: [%[5]s]
clusterDomain: cluster.local
resolvConf: %[6]s
containerRuntimeEndpoint: unix://%[7]s
evictionHard:
  memory.available: "0%%"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
rotateCertificates: false
shutdownGracePeriod: 0s
`, NodeIP, filepath.Join(pki, "kubelet.crt"), filepath.Join(pki, "kubelet.key"), filepath.Join(pki, "ca.crt"),
		DNSServiceIP, resolvConf, d.ContainerdSocket())
}

// kubeProxyConfig: iptables mode. conntrack left as the kernel has it (its limits are the
// machine's, not the node namespace's).
func kubeProxyConfig(d Dirs) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: %[1]s
hostnameOverride: %[2]s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection:
  kubeconfig: %[3]s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, ClusterCIDR, NodeName, d.Kubeconfig())
}
