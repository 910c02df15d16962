package bootstrap

import (
	"net"
	"strconv"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
)

func parse(t *testing.T, o Options) *bootstrapv3.Bootstrap {
	t.Helper()
	out, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	return &b
}

// With --metrics the admin can stay on localhost: a separate listener forwards exactly the
// scrape, readiness and liveness paths to it and answers 404 to the rest of the admin API.
func TestMetricsListenerExposesOnlyScrapeReadinessAndLiveness(t *testing.T) {
	b := parse(t, Options{NodeID: "n", XDS: "cp:18000", Admin: "127.0.0.1:9901", Metrics: "0.0.0.0:9102"})
	if a := b.GetAdmin().GetAddress().GetSocketAddress(); a.GetAddress() != "127.0.0.1" || a.GetPortValue() != 9901 {
		t.Errorf("admin on %v", a)
	}
	ls := b.GetStaticResources().GetListeners()
	if len(ls) != 1 || ls[0].GetAddress().GetSocketAddress().GetAddress() != "0.0.0.0" || ls[0].GetAddress().GetSocketAddress().GetPortValue() != 9102 {
		t.Fatalf("static listeners %v", ls)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := ls[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	routed := map[string]string{}
	for _, r := range hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
		switch {
		case r.GetRoute() != nil:
			routed[r.GetMatch().GetPath()] = r.GetRoute().GetCluster() + r.GetRoute().GetPrefixRewrite()
		case r.GetDirectResponse().GetStatus() == 404 && r.GetMatch().GetPrefix() == "/":
			routed["*"] = "404"
		}
	}
	want := map[string]string{
		MetricsPath:   adminCluster + MetricsPath,
		ReadinessPath: adminCluster + ReadinessPath,
		LivenessPath:  adminCluster + "/server_info",
		"*":           "404",
	}
	if len(routed) != len(want) {
		t.Errorf("routes %v, want %v", routed, want)
	}
	for k, v := range want {
		if routed[k] != v {
			t.Errorf("route %s -> %q, want %q", k, routed[k], v)
		}
	}
	var adminTarget string
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == adminCluster {
			sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			adminTarget = net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
		}
	}
	if adminTarget != "127.0.0.1:9901" {
		t.Errorf("the metrics listener forwards to %q, not the admin", adminTarget)
	}

	if b := parse(t, Options{NodeID: "n", XDS: "cp:18000", Admin: "127.0.0.1:9901"}); len(b.GetStaticResources().GetListeners()) != 0 {
		t.Error("a metrics listener without --metrics")
	}
	if _, err := Render(Options{NodeID: "n", XDS: "cp:18000", Admin: "127.0.0.1:9901", Metrics: "9102"}); err == nil {
		t.Error("a metrics address without a host:port was accepted")
	}
}

// A pod must not turn ready with no client listeners: with WaitForXDS, Envoy waits for the
// control plane's clusters and listeners (initial_fetch_timeout 0) instead of going live
// without them after its default 15s.
func TestWaitForXDSDisablesTheInitialFetchTimeout(t *testing.T) {
	b := parse(t, Options{NodeID: "n", XDS: "cp:18000", Admin: "127.0.0.1:9901", WaitForXDS: true})
	d := b.GetDynamicResources()
	for name, src := range map[string]bool{
		"lds": d.GetLdsConfig().GetInitialFetchTimeout() != nil && d.GetLdsConfig().GetInitialFetchTimeout().AsDuration() == 0,
		"cds": d.GetCdsConfig().GetInitialFetchTimeout() != nil && d.GetCdsConfig().GetInitialFetchTimeout().AsDuration() == 0,
	} {
		if !src {
			t.Errorf("%s initial_fetch_timeout is not 0 with WaitForXDS", name)
		}
	}
	d = parse(t, Options{NodeID: "n", XDS: "cp:18000", Admin: "127.0.0.1:9901"}).GetDynamicResources()
	if d.GetLdsConfig().GetInitialFetchTimeout() != nil || d.GetCdsConfig().GetInitialFetchTimeout() != nil {
		t.Error("without WaitForXDS the bootstrap changes Envoy's default initial fetch timeout")
	}
}

// Envoy tries an unreachable control plane again at least every second: a policy changed while
// none ran is in force soon after one is back (Envoy's default backoff grows to 30s).
func TestEnvoyRetriesTheControlPlaneEverySecond(t *testing.T) {
	b := parse(t, Options{NodeID: "n", XDS: "cp:18000", Admin: "127.0.0.1:9901"})
	backoff := b.GetDynamicResources().GetAdsConfig().GetGrpcServices()[0].GetEnvoyGrpc().GetRetryPolicy().GetRetryBackOff()
	if backoff.GetMaxInterval().AsDuration() != time.Second || backoff.GetBaseInterval().AsDuration() > time.Second {
		t.Errorf("xDS reconnect backoff %v", backoff)
	}
}
