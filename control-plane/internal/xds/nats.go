package xds

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
)

// In front of a NATS cluster the gateway is the only address clients may learn: every INFO the
// filter forwards names the listener the client reached and the gateway's advertised addresses
// (wasm-filter/core/src/nats/info.rs), never a server. Envoy sends new connections to the seed
// servers in turn, skips one that is down or in lame duck mode (nats-server closes its client
// port then) by an active health check, and, within the check's second, tries the next server
// when a connect fails and sets the failed one aside.

// natsChainPrefix names each NATS listener's filter chain, by which the filter knows which
// listener a client reached.
const natsChainPrefix = "weighstation-"

// natsHealth: how often each Envoy checks each seed server, and how long a check may take. A
// server answers a new connection with INFO at once; one that is down or in lame duck mode
// refuses it, and is skipped from the next check on.
const (
	natsHealthInterval = time.Second
	natsHealthTimeout  = time.Second
	// seedConnectAttempts: a connect that fails (the server died since its last check) is
	// tried again on another server before the client sees its connection close.
	seedConnectAttempts = 3
)

// natsChain is the filter chain name of a NATS listener.
func natsChain(listener string) string { return natsChainPrefix + listener }

// natsListener is how the clients of one NATS listener see the gateway: host and port are the
// first advertised address, else the listener's own.
func natsListener(name, listen string, advertise []string) (compile.NATSListener, error) {
	at := listen
	if len(advertise) > 0 {
		at = advertise[0]
	}
	host, port, err := splitHostPort(at)
	if err != nil {
		return compile.NATSListener{}, fmt.Errorf("%s listener: %w", name, err)
	}
	return compile.NATSListener{Chain: natsChain(name), Host: host, Port: port, ConnectURLs: advertise}, nil
}

// natsListeners are the NATS listeners as the filter names them in INFOs.
func natsListeners(g Gateway) ([]compile.NATSListener, error) {
	var out []compile.NATSListener
	for _, l := range []struct {
		name, listen string
		advertise    []string
	}{{string(compile.NATS), g.NATSListen, g.NATSAdvertise}, {natsTLSListenerName, g.NATSTLSListen, g.NATSTLSAdvertise}} {
		if l.listen == "" {
			continue
		}
		nl, err := natsListener(l.name, l.listen, l.advertise)
		if err != nil {
			return nil, err
		}
		out = append(out, nl)
	}
	return out, nil
}

// natsTLSListenerName names the TLS-first NATS listener (and, through natsChain, its chain).
const natsTLSListenerName = "nats_tls"

// withSeedHealth has Envoy check every seed server (NATS) or bootstrap broker (Kafka) and set
// aside one whose connect failed; a check passes when a new connection is answered with
// receive (nil: when it connects). Round robin, not least-request: a dead server carries no
// connections, so least-request would prefer it until the health check notices, and a
// connect's retries could all land on it (measured: a new client got EOF); in turn, each retry
// goes to the next server.
func withSeedHealth(c *clusterv3.Cluster, receive []byte) {
	c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	c.OutlierDetection = &clusterv3.OutlierDetection{
		// For TCP a "5xx" is a failed connect: one is enough to set a server aside until its
		// health check passes again.
		Consecutive_5Xx:    wrapperspb.UInt32(1),
		Interval:           durationpb.New(natsHealthInterval),
		BaseEjectionTime:   durationpb.New(2 * natsHealthInterval),
		MaxEjectionPercent: wrapperspb.UInt32(100),
	}
	c.HealthChecks = []*corev3.HealthCheck{{
		Timeout:            durationpb.New(natsHealthTimeout),
		Interval:           durationpb.New(natsHealthInterval),
		NoTrafficInterval:  durationpb.New(natsHealthInterval),
		UnhealthyThreshold: wrapperspb.UInt32(1),
		HealthyThreshold:   wrapperspb.UInt32(1),
		// A new connection per check: nats-server sends INFO once, on connect.
		ReuseConnection: wrapperspb.Bool(false),
		HealthChecker:   &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}},
	}}
	if receive != nil {
		tcp := c.HealthChecks[0].GetTcpHealthCheck()
		tcp.Receive = []*corev3.HealthCheck_Payload{{Payload: &corev3.HealthCheck_Payload_Text{Text: hex.EncodeToString(receive)}}}
	}
}

// checkAdvertised reports an advertised address that is not host:port.
func checkAdvertised(flag string, addrs []string) error {
	for _, a := range addrs {
		host, _, err := splitHostPort(a)
		if err == nil && host == "" {
			err = errors.New("no host")
		}
		if err != nil {
			return fmt.Errorf("%s %q: not host:port: %v", flag, a, err)
		}
	}
	return nil
}
