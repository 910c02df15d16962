// Package status serves the control plane's health, readiness, status and metrics over HTTP.
package status

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/weighstation/weighstation/control-plane/internal/controller"
	"github.com/weighstation/weighstation/control-plane/internal/discovery"
	"github.com/weighstation/weighstation/control-plane/internal/quota"
	"github.com/weighstation/weighstation/control-plane/internal/tenantfeed"
	"github.com/weighstation/weighstation/control-plane/internal/tlssecrets"
	"github.com/weighstation/weighstation/control-plane/internal/usage"
	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

// Report is the /status document.
type Report struct {
	controller.State
	Nodes []xds.NodeStatus `json:"nodes"`
	// Quota is the quota service as last probed; absent when no tenant is global.
	Quota *quota.Standing `json:"quota,omitempty"`
	// TLS is the TLS material served to Envoy; absent without any.
	TLS *tlssecrets.Standing `json:"tls,omitempty"`
	// KafkaBrokers are the brokers of discovered Kafka clusters: fronted, or withheld and why.
	KafkaBrokers []discovery.Broker `json:"kafkaBrokers,omitempty"`
}

// Sources are what the handlers read.
type Sources struct {
	State func() controller.State
	Nodes func() []xds.NodeStatus
	Quota func() *quota.Standing
	TLS   func() *tlssecrets.Standing
	// KafkaBrokers (nil: none discovered).
	KafkaBrokers func() []discovery.Broker
	// Clients are the per-client metrics (nil: not enabled, --client-metrics 0).
	Clients func() []usage.ClientRate
}

func (s Sources) kafkaBrokers() []discovery.Broker {
	if s.KafkaBrokers == nil {
		return nil
	}
	return s.KafkaBrokers()
}

func (s Sources) tls() *tlssecrets.Standing {
	if s.TLS == nil {
		return nil
	}
	return s.TLS()
}

// Handler serves /healthz, /readyz, /status and /metrics.
func Handler(src Sources) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	// Ready once a policy version is active. A later invalid change does not make it unready:
	// the last good version is still being served.
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if src.State().Active == nil {
			http.Error(w, "no valid policy version loaded yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(Report{State: src.State(), Nodes: src.Nodes(), Quota: src.Quota(), TLS: src.tls(), KafkaBrokers: src.kafkaBrokers()})
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		writeMetrics(w, src.State(), src.Nodes(), src.Quota(), src.tls(), src.kafkaBrokers())
		if src.Clients != nil {
			writeClientMetrics(w, src.Clients())
		}
	})
	return mux
}

// writeMetrics renders the Prometheus text format by hand: a handful of gauges and counters
// whose values are read from the controller at scrape time.
func writeMetrics(w http.ResponseWriter, st controller.State, nodes []xds.NodeStatus, q *quota.Standing, tls *tlssecrets.Standing, brokers []discovery.Broker) {
	var b strings.Builder
	metric := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	metric("weighstation_controlplane_policy_generation", "gauge", "Generation of the policy version in force, numbered past any a gateway runs (alike across replicas).")
	fmt.Fprintf(&b, "weighstation_controlplane_policy_generation %d\n", st.Generation)
	metric("weighstation_controlplane_policy_error", "gauge", "1 while the policy directory holds a refused change.")
	errVal := 0
	if st.LastError != nil {
		errVal = 1
	}
	fmt.Fprintf(&b, "weighstation_controlplane_policy_error %d\n", errVal)
	metric("weighstation_controlplane_reloads_total", "counter", "Policy reloads by result.")
	results := make([]string, 0, len(st.Reloads))
	for r := range st.Reloads {
		results = append(results, r)
	}
	sort.Strings(results)
	for _, r := range results {
		fmt.Fprintf(&b, "weighstation_controlplane_reloads_total{result=%q} %d\n", r, st.Reloads[r])
	}
	active := ""
	if st.Active != nil {
		active = st.Active.Version
	}
	metric("weighstation_controlplane_node_connected", "gauge", "1 while the Envoy node holds an xDS stream.")
	metric("weighstation_controlplane_node_in_sync", "gauge", "1 when the node has acknowledged the active policy (its content, whichever replica numbered it).")
	metric("weighstation_controlplane_node_nack", "gauge", "1 when the node rejected the last policy version it was sent.")
	for _, n := range nodes {
		fmt.Fprintf(&b, "weighstation_controlplane_node_connected{node=%q} %d\n", n.ID, boolInt(n.Connected))
		fmt.Fprintf(&b, "weighstation_controlplane_node_in_sync{node=%q} %d\n", n.ID, boolInt(active != "" && tenantfeed.ContentOf(n.AckedVersion) == tenantfeed.ContentOf(active)))
		fmt.Fprintf(&b, "weighstation_controlplane_node_nack{node=%q} %d\n", n.ID, boolInt(n.NackedVersion != ""))
	}
	if q != nil {
		metric("weighstation_controlplane_quota_service_up", "gauge", "1 while the quota service and its Redis answer; 0 while replicas fall back to limit / live replicas.")
		fmt.Fprintf(&b, "weighstation_controlplane_quota_service_up %d\n", boolInt(q.Reachable))
	}
	if tls != nil {
		metric("weighstation_controlplane_tls_error", "gauge", "1 while the TLS files on disk do not load (the previous certificates stay in force).")
		fmt.Fprintf(&b, "weighstation_controlplane_tls_error %d\n", boolInt(tls.Error != ""))
		if t := tls.ServerCertificateNotAfter; t != nil {
			metric("weighstation_controlplane_tls_certificate_not_after_seconds", "gauge", "When the certificate clients see expires (Unix time).")
			fmt.Fprintf(&b, "weighstation_controlplane_tls_certificate_not_after_seconds %d\n", t.Unix())
		}
	}
	if len(brokers) > 0 {
		metric("weighstation_controlplane_kafka_broker_fronted", "gauge", "1 for a discovered Kafka broker the gateway fronts; 0 for one it withholds from every client (out of range, or an address no Envoy could dial: see /status).")
		for _, k := range brokers {
			fmt.Fprintf(&b, "weighstation_controlplane_kafka_broker_fronted{chain=%q,node=\"%d\",address=%q,state=%q} %d\n",
				k.Chain, k.Node, k.Address, k.State, boolInt(k.State == discovery.Fronted))
		}
	}
	_, _ = w.Write([]byte(b.String()))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
