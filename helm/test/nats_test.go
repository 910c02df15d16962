package charttest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// In front of a NATS cluster (values/nats-cluster.yaml: three servers of a StatefulSet, every
// one a seed): the control plane gets every seed as an endpoint of the NATS upstream, and the
// gateway addresses clients are told in INFO in place of any server's — the Envoy Service's DNS
// name and its NATS port unless nats.advertise names others; the same for the TLS-first
// listener with its own port. The expectations are computed from the rendered Service, not from
// the chart's helpers.
func TestNATSClusterSeedsAndAdvertisedAddresses(t *testing.T) {
	file := valueSets(t)["nats-cluster"]
	seeds := []string{
		"nats-0.nats-headless.nats.svc.cluster.local:4222",
		"nats-1.nats-headless.nats.svc.cluster.local:4222",
		"nats-2.nats-headless.nats.svc.cluster.local:4222",
	}
	tlsOn := []string{"tls.secretName=gw-tls", "tls.nats.enabled=true"}
	cases := []struct {
		name             string
		sets             []string
		advertise        string // "" : the Envoy Service's host with its nats port
		tls              bool
		tlsAdvertise     string // "" : the Envoy Service's host with its nats-tls port
		upstreamOverride []string
	}{
		{name: "defaults"},
		{name: "explicit advertise", sets: []string{"nats.advertise={nats.example.com:4222,nats-b.example.com:14222}"},
			advertise: "nats.example.com:4222,nats-b.example.com:14222"},
		{name: "TLS listener", sets: tlsOn, tls: true},
		{name: "TLS listener, explicit advertise", sets: append([]string{"tls.nats.advertise={nats.example.com:4443}"}, tlsOn...),
			tls: true, tlsAdvertise: "nats.example.com:4443"},
		{name: "one Service in front of every server", sets: []string{"nats.servers={nats://nats.nats.svc.cluster.local:4222}"},
			upstreamOverride: []string{"nats.nats.svc.cluster.local:4222"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := mustRender(t, []string{file}, c.sets...)
			args := strings_(container(t, ms.find(t, "Deployment", "-control-plane"), "containers", "control-plane")["args"])
			svc := ms.find(t, "Service", "-envoy")
			svcHost := fmt.Sprintf("%s.%s.svc.cluster.local", svc.name(), namespace)

			want := seeds
			if c.upstreamOverride != nil {
				want = c.upstreamOverride
			}
			if got, _ := flagValue(args, "nats-upstream"); got != strings.Join(want, ",") {
				t.Errorf("--nats-upstream=%s, want every seed: %s", got, strings.Join(want, ","))
			}
			wantAdvertise := c.advertise
			if wantAdvertise == "" {
				wantAdvertise = fmt.Sprintf("%s:%d", svcHost, servicePort(t, svc, "nats"))
			}
			if got := flagValues(args, "nats-advertise"); len(got) != 1 || got[0] != wantAdvertise {
				t.Errorf("--nats-advertise=%q, want %s", got, wantAdvertise)
			}
			got := flagValues(args, "nats-tls-advertise")
			if !c.tls {
				if len(got) != 0 {
					t.Errorf("no TLS listener, but --nats-tls-advertise=%q", got)
				}
				return
			}
			if _, ok := flagValue(args, "nats-tls-listen"); !ok {
				t.Fatal("tls.nats.enabled, but no --nats-tls-listen")
			}
			wantTLS := c.tlsAdvertise
			if wantTLS == "" {
				wantTLS = fmt.Sprintf("%s:%d", svcHost, servicePort(t, svc, "nats-tls"))
			}
			if len(got) != 1 || got[0] != wantTLS {
				t.Errorf("--nats-tls-advertise=%q, want %s", got, wantTLS)
			}
		})
	}

	// A TLS client reconnecting to an advertised name checks the certificate against it: the
	// certificate cert-manager issues names every host of tls.nats.advertise (an IP is no DNS name).
	cert := mustRender(t, []string{file}, "tls.nats.enabled=true", "tls.certManager.enabled=true",
		"tls.certManager.issuerRef.name=platform-ca", "tls.nats.advertise={nats.example.com:4443,10.0.0.1:4443}").find(t, "Certificate", "-tls")
	names := strings_(get(cert, "spec", "dnsNames"))
	if !slices.Contains(names, "nats.example.com") || slices.Contains(names, "10.0.0.1") {
		t.Errorf("the certificate names %v, want nats.example.com (and no IP)", names)
	}

	// Without NATS there is nothing to advertise.
	args := strings_(container(t, mustRender(t, []string{valueSets(t)["kafka-3-brokers"]}).find(t, "Deployment", "-control-plane"), "containers", "control-plane")["args"])
	if got := append(flagValues(args, "nats-advertise"), flagValues(args, "nats-tls-advertise")...); len(got) != 0 {
		t.Errorf("NATS disabled, but advertise flags rendered: %q", got)
	}
}

// networkPolicy.natsServers closes the NATS servers to everyone but the gateway: in the
// servers' namespace, it selects every server of the cluster (by the StatefulSet's labels, so a
// fourth server added later is selected too), admits this release's Envoy pods (and no other
// pod, here or elsewhere) on the client port only, and the servers themselves on every port
// (routes, gateways, leafnodes, monitoring). Pods are matched against the rendered selectors as
// the NetworkPolicy API matches them.
func TestNATSServersNetworkPolicy(t *testing.T) {
	file := valueSets(t)["nats-cluster"]
	ms := mustRender(t, []string{file})
	np := ms.find(t, "NetworkPolicy", "-nats-servers")
	if ns := get(np, "metadata", "namespace"); ns != "nats" {
		t.Errorf("the policy is in namespace %v, want the servers' (nats)", ns)
	}
	if types := strings_(get(np, "spec", "policyTypes")); fmt.Sprint(types) != "[Ingress]" {
		t.Errorf("policyTypes %v, want [Ingress]", types)
	}
	selector := get(np, "spec", "podSelector").(map[string]any)

	// The pods: the servers as the StatefulSet labels them (nats-3 added later), a server of
	// another NATS installation, the Envoy pods of this release and of another one, a client.
	server := func(i int) map[string]any {
		return map[string]any{"app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": "nats",
			"statefulset.kubernetes.io/pod-name": fmt.Sprintf("nats-%d", i), "apps.kubernetes.io/pod-index": fmt.Sprint(i)}
	}
	envoyLabels := get(ms.find(t, "Deployment", "-envoy"), "spec", "template", "metadata", "labels").(map[string]any)
	otherRelease := map[string]any{}
	for k, v := range envoyLabels {
		otherRelease[k] = v
	}
	otherRelease["app.kubernetes.io/instance"] = "other"
	type pod struct {
		name      string
		namespace string
		labels    map[string]any
	}
	var servers []pod
	for i := 0; i < 4; i++ {
		servers = append(servers, pod{fmt.Sprintf("nats-%d", i), "nats", server(i)})
	}
	other := pod{"other-nats-0", "nats", map[string]any{"app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": "other-nats"}}
	envoy := pod{"envoy", namespace, envoyLabels}
	others := []pod{
		{"envoy of another release", namespace, otherRelease},
		{"envoy labels in another namespace", "elsewhere", envoyLabels},
		{"client", "apps", map[string]any{"app": "orders"}},
		{"client in the servers' namespace", "nats", map[string]any{"app": "nats-box"}},
		other,
	}
	for _, s := range servers {
		if !matchLabelSelector(t, selector, s.labels) {
			t.Errorf("the policy does not select server %s", s.name)
		}
	}
	if matchLabelSelector(t, selector, other.labels) {
		t.Errorf("the policy selects %s, a server of another cluster", other.name)
	}

	// admitted reports whether a pod may connect to a server on port (0: a port no rule names).
	rules, _ := get(np, "spec", "ingress").([]any)
	if len(rules) != 2 {
		t.Fatalf("%d ingress rules, want 2 (the gateway; the servers): %v", len(rules), rules)
	}
	admitted := func(p pod, port int) bool {
		for _, r := range rules {
			ports, hasPorts := get(r, "ports").([]any)
			portOK := !hasPorts
			for _, pp := range ports {
				portOK = portOK || (get(pp, "port") == port && get(pp, "protocol") == "TCP")
			}
			if !portOK {
				continue
			}
			for _, peer := range get(r, "from").([]any) {
				if peerMatches(t, peer.(map[string]any), "nats", p.namespace, p.labels) {
					return true
				}
			}
		}
		return false
	}
	// The client port: the gateway and the servers only.
	if !admitted(envoy, 4222) {
		t.Error("this release's Envoy pods may not reach the servers' client port")
	}
	for _, p := range others {
		if admitted(p, 4222) {
			t.Errorf("%s may reach the servers' client port around the gateway", p.name)
		}
	}
	// Every other port (routes 6222, leafnodes 7422, gateways 7522, monitoring 8222): the
	// servers only, the new one included.
	for _, port := range []int{6222, 7422, 7522, 8222} {
		if admitted(envoy, port) {
			t.Errorf("the Envoy pods may reach the servers on port %d", port)
		}
		for _, s := range servers {
			if !admitted(s, port) {
				t.Errorf("server %s may not reach the others on port %d", s.name, port)
			}
		}
		for _, p := range others {
			if admitted(p, port) {
				t.Errorf("%s may reach the servers on port %d", p.name, port)
			}
		}
	}

	// networkPolicy.natsServers.from admits more peers, on every port; several client ports
	// are each admitted to the gateway.
	ms = mustRender(t, []string{file}, "networkPolicy.natsServers.from[0].podSelector.matchLabels.app=nats-box",
		"networkPolicy.natsServers.ports={4222,4333}")
	np = ms.find(t, "NetworkPolicy", "-nats-servers")
	rules, _ = get(np, "spec", "ingress").([]any)
	box := pod{"nats-box", "nats", map[string]any{"app": "nats-box"}}
	if !admitted(box, 8222) || !admitted(envoy, 4333) || admitted(envoy, 8222) {
		t.Errorf("with from and two client ports: nats-box admitted %v, Envoy on 4333 %v, Envoy on 8222 %v: %v",
			admitted(box, 8222), admitted(envoy, 4333), admitted(envoy, 8222), rules)
	}

	// Off by default, and independent of the release's own NetworkPolicies.
	for _, o := range mustRender(t, nil) {
		if o.kind() == "NetworkPolicy" {
			t.Errorf("NetworkPolicy %s rendered by default", o.name())
		}
	}
	only := mustRender(t, []string{file}, "networkPolicy.enabled=false")
	only.find(t, "NetworkPolicy", "-nats-servers")
}

// peerMatches reports whether a NetworkPolicyPeer admits a pod (policyNamespace: where the
// policy lives; a peer with only a podSelector means pods of that namespace).
func peerMatches(t *testing.T, peer map[string]any, policyNamespace, podNamespace string, labels map[string]any) bool {
	t.Helper()
	if _, ok := peer["ipBlock"]; ok {
		return false
	}
	nsSel, hasNS := peer["namespaceSelector"].(map[string]any)
	podSel, hasPod := peer["podSelector"].(map[string]any)
	if hasNS {
		if !matchLabelSelector(t, nsSel, map[string]any{"kubernetes.io/metadata.name": podNamespace}) {
			return false
		}
	} else if podNamespace != policyNamespace {
		return false
	}
	return !hasPod || matchLabelSelector(t, podSel, labels)
}

// matchLabelSelector matches a LabelSelector of matchLabels (an empty one selects everything).
func matchLabelSelector(t *testing.T, sel map[string]any, labels map[string]any) bool {
	t.Helper()
	if _, ok := sel["matchExpressions"]; ok {
		t.Fatalf("selector with matchExpressions: %v", sel)
	}
	want, _ := sel["matchLabels"].(map[string]any)
	for k, v := range want {
		if got, ok := labels[k]; !ok || fmt.Sprint(got) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}
