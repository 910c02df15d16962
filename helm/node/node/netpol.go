package node

import (
	"fmt"
	"os/exec"
	"strings"
)

// netpolQueue is the netfilter queue the node hands new pod connections to.
const netpolQueue = 100

// networkPolicyRules hand the first packet of every new connection from or to a pod to the
// NetworkPolicy enforcer's queue (kube-network-policies), which accepts or drops it. Its own
// nftables table would do this with the nftables `queue` expression, which this machine's kernel
// lacks, so these iptables NFQUEUE rules (in the node's namespace only) stand in. Established
// connections stay in the kernel. --queue-bypass lets traffic through while the enforcer is not
// running (it fails open, as kube-network-policies' --fail-open): a test that expects a refusal
// then fails, rather than the node.
var networkPolicyRules = [][]string{
	{"-t", "mangle", "-N", "WEIGHSTATION-NETPOL"},
	{"-t", "mangle", "-A", "POSTROUTING", "-j", "WEIGHSTATION-NETPOL"},
	{"-t", "mangle", "-A", "WEIGHSTATION-NETPOL", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"},
	// The node's own processes (the kubelet's probes), as kube-network-policies exempts them.
	{"-t", "mangle", "-A", "WEIGHSTATION-NETPOL", "-m", "owner", "--uid-owner", "0", "-j", "RETURN"},
	{"-t", "mangle", "-A", "WEIGHSTATION-NETPOL", "-s", PodCIDR, "-j", "NFQUEUE", "--queue-num", fmt.Sprint(netpolQueue), "--queue-bypass"},
	{"-t", "mangle", "-A", "WEIGHSTATION-NETPOL", "-d", PodCIDR, "-j", "NFQUEUE", "--queue-num", fmt.Sprint(netpolQueue), "--queue-bypass"},
}

func addNetworkPolicyRules() error {
	for _, r := range networkPolicyRules {
		if out, err := exec.Command("iptables", r...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %v: %s", strings.Join(r, " "), err, out)
		}
	}
	return nil
}
