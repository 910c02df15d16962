package localstack

import (
	"context"
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/bootstrap"
	"github.com/weighstation/weighstation/control-plane/internal/redisclient"
	"github.com/weighstation/weighstation/control-plane/internal/xds"
)

const (
	startTimeout      = 30 * time.Second
	kafkaStartTimeout = 90 * time.Second
	stopGrace         = 10 * time.Second
)

// Config says what to start and where.
type Config struct {
	ToolsDir         string // .tools: bin/ (envoy, nats-server, weighstation) and kafka/libs
	WasmFile         string
	PolicyDir        string
	WorkDir          string // logs and broker data
	Ports            Ports
	EnvoyConcurrency int
	WithKafka        bool
	// ExtraNATSUsers are added to nats-server beside contract §1's users, each with the password
	// "<user>-secret" (tests give each scenario a tenant of its own).
	ExtraNATSUsers []string
	// ExtraKafkaSASLUsers are added to the Kafka SASL listener beside the local ones (PLAIN and
	// SCRAM-SHA-256/512), each with the password "<user>-secret".
	ExtraKafkaSASLUsers []string
	// ExtraKafkaBrokers are more plaintext Kafka broker listeners of the gateway: each fronts
	// Upstream (a broker listener, or a test's relay in front of one) on the loopback port
	// Listen, with address rewriting (--kafka-broker).
	ExtraKafkaBrokers []KafkaRoute
	// ExtraNkeyUsers are public keys of NATS nkey users added beside the local ones, each
	// proxy_required (reachable only through the gateway).
	ExtraNkeyUsers []string
	// Replicas is how many Envoys to run (GATEWAY_REPLICAS), replica i on every listener port + i.
	Replicas int
	// WithQuota starts Redis and the quota service (always with more than one replica).
	WithQuota bool
	// RedisMode is how the quota store runs (REDIS_MODE; "" is single): one plain server, or a
	// primary, a replica and three sentinels, or a cluster of three primaries and three
	// replicas, those two with TLS and passwords (redisstore.go).
	RedisMode redisclient.Mode
	// NATSUpstreamTLS makes nats-server accept TLS only (handshake first), which the gateway
	// originates; clients can then reach nats-server only through the gateway.
	NATSUpstreamTLS bool
	// Supervise starts a process that exits on its own again (after a second), as Kubernetes
	// would, instead of leaving the stack without it: `make run` and the fault tests.
	Supervise bool
	// WithCollector starts an OpenTelemetry Collector (.tools/bin/otelcol) and has the control
	// plane send it the decision log as OTLP log records (--otlp-logs-endpoint).
	WithCollector bool
	// NATSOperatorMode runs nats-server with decentralized JWT authentication (an operator and
	// one account, NATSAccount) instead of its configured users.
	NATSOperatorMode bool
	// NATSServers is how many nats-servers to run (NATS_SERVERS; 0 or 1: one). With more, they
	// form one cluster with JetStream, server i on NATSUpstream + i, NATSMonitor + i and
	// NATSCluster + i, and the gateway balances its upstream connections across all of them.
	NATSServers int
	// KafkaBrokers is how many Kafka brokers to run (KAFKA_BROKERS; 0 or 1: the single node of
	// always, whose GATEWAY listener advertises the gateway). With more, a KRaft cluster of that
	// many nodes, each broker and controller, broker i on every Kafka broker port + i: its
	// brokers advertise their own addresses on every listener, as an existing cluster's do, and
	// the gateway fronts each broker's listeners (see kafkacluster.go).
	KafkaBrokers int
	// Kubernetes, when set, has the control plane take its policies from LimitPolicy and
	// GatewayDefaults objects (--policy-source=kubernetes) instead of PolicyDir.
	Kubernetes *KubernetesPolicies

	// NoopWasmFile and NoopNativeFile are the no-op filters of the optional no-op listeners
	// (Ports.NATSNoopWasm…): a proxy-wasm module and an Envoy dynamic module.
	NoopWasmFile, NoopNativeFile string
}

// KubernetesPolicies is the API server the control plane watches.
type KubernetesPolicies struct {
	Kubeconfig string
	Namespace  string // the platform's (--platform-namespace)
}

// KafkaRoute is one gateway listener for one broker address.
type KafkaRoute struct {
	Upstream string // host:port
	Listen   int    // loopback port
}

// Stack is a running local stack. Its processes are exported for tests that stall or stop one.
type Stack struct {
	cfg      Config
	logDir   string
	procs    []*process
	security *security
	tls      *tlsMaterial
	operator *natsOperator

	NATSServer, Kafka, ControlPlane, Envoy, Redis, Quota, Collector *process
	// RedisNodes are the quota store's data nodes in sentinel and cluster mode (node i on
	// Ports.Redis + i); Redis is the first. Sentinels are the sentinels.
	RedisNodes, Sentinels []*process
	controlPlaneArgs      []string
	// Envoys are the gateway replicas; Envoy is the first.
	Envoys []*process
	// NATSServers are the nats-servers (Config.NATSServers); NATSServer is the first.
	NATSServers []*process
	// KafkaBrokers are the Kafka nodes (Config.KafkaBrokers, then AddKafkaBroker's); Kafka is
	// the first.
	KafkaBrokers   []*process
	kafkaClusterID string
}

// Start brings the stack up in dependency order and waits until Envoy has acknowledged the
// active policy version; on any failure it stops what it started.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	s := &Stack{cfg: cfg, logDir: filepath.Join(cfg.WorkDir, "logs")}
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		return nil, err
	}
	sec, err := newSecurity(cfg.WorkDir, cfg.ExtraNkeyUsers)
	if err != nil {
		return nil, err
	}
	s.security = sec
	if s.tls, err = newTLSMaterial(filepath.Join(cfg.WorkDir, "tls")); err != nil {
		return nil, fmt.Errorf("issuing the local certificates: %w", err)
	}
	if cfg.NATSOperatorMode {
		if s.operator, err = newNATSOperator(); err != nil {
			return nil, fmt.Errorf("making the NATS operator: %w", err)
		}
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"nats-server", s.startNATS},
		{"kafka", s.startKafka},
		{"redis", s.startRedisStore},
		{"quota service", s.startQuota},
		{"otelcol", s.startCollector},
		{"control plane", s.startControlPlane},
		{"envoy", s.startEnvoys},
	}
	for _, st := range steps {
		if st.name == "kafka" && !cfg.WithKafka {
			continue
		}
		if (st.name == "redis" || st.name == "quota service") && !cfg.quota() {
			continue
		}
		if st.name == "otelcol" && !cfg.WithCollector {
			continue
		}
		if err := ctx.Err(); err != nil {
			s.Stop()
			return nil, err
		}
		if err := st.run(); err != nil {
			s.Stop()
			return nil, fmt.Errorf("%s: %w (logs in %s)", st.name, err, s.logDir)
		}
	}
	return s, nil
}

// Stop stops every process, last started first; a Kafka cluster's nodes all at once
// (stopKafkaCluster).
func (s *Stack) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		if s.cfg.kafkaCluster() && slices.Contains(s.KafkaBrokers, s.procs[i]) {
			s.stopKafkaCluster()
			continue
		}
		s.procs[i].stop(stopGrace)
	}
	s.procs = nil
}

// ProxyPublicKey is the gateway's NATS proxy key, which nats-server trusts.
func (s *Stack) ProxyPublicKey() string { return s.security.proxyPublic }

// NkeyDir holds the seed of each local nkey user, <tenant>.nk.
func (s *Stack) NkeyDir() string { return filepath.Join(s.cfg.WorkDir, "nkeys") }

// TLSDir holds the local certificates: ca.crt (what clients trust), the gateway's server and
// client certificates, the brokers', and a client certificate per local tenant.
func (s *Stack) TLSDir() string { return s.tls.dir }

// RotateServerCertificate replaces the gateway's server certificate with a new one from the same
// CA and returns its serial number; the control plane pushes it to Envoy within a second.
func (s *Stack) RotateServerCertificate() (*big.Int, error) { return s.tls.RotateServerCertificate() }

// IssueClientCertificate writes TLSDir/<name>.crt and .key, a client certificate the gateway
// verifies, with this subject and optional SAN (a URI or DNS name).
func (s *Stack) IssueClientCertificate(name string, subject pkix.Name, san string) error {
	_, err := s.tls.IssueClient(name, subject, san)
	return err
}

// NATSAccount is the public key of the operator-mode account (NATSOperatorMode).
func (s *Stack) NATSAccount() string { return s.operator.accountPub }

// IssueNATSUser issues a user JWT of the operator-mode account and its nkey seed.
func (s *Stack) IssueNATSUser(name string, proxyRequired bool) (token string, seed []byte, err error) {
	return s.operator.userJWT(name, proxyRequired)
}

// LogDir is where each process's output goes.
func (s *Stack) LogDir() string { return s.logDir }

func (s *Stack) tool(name string) string { return filepath.Join(s.cfg.ToolsDir, "bin", name) }

func (c Config) quota() bool { return c.WithQuota || c.Replicas > 1 }

// replicaCount is how many Envoys the stack runs.
func (c Config) replicaCount() int { return max(c.Replicas, 1) }

func (s *Stack) startEnvoys() error {
	for i := range s.cfg.replicaCount() {
		if err := s.startEnvoy(i); err != nil {
			return err
		}
	}
	return nil
}

// AddEnvoy starts one more gateway replica under the running control plane, as a scale-up
// does; its ports must have been set aside (Ports for that many replicas). Its index.
func (s *Stack) AddEnvoy() (int, error) {
	i := len(s.Envoys)
	return i, s.startEnvoy(i)
}

// startEnvoy starts replica i: node id by its admin port, every listener moved up by i.
func (s *Stack) startEnvoy(replica int) error {
	p := s.cfg.Ports
	admin := p.Admin + replica
	boot, err := bootstrap.Render(bootstrap.Options{
		NodeID: "weighstation-local-" + strconv.Itoa(admin), XDS: addr(p.XDS), Admin: addr(admin),
		ListenPortOffset: replica,
	})
	if err != nil {
		return err
	}
	name := "envoy"
	if replica > 0 {
		name = "envoy-" + strconv.Itoa(replica)
	}
	bootPath := filepath.Join(s.cfg.WorkDir, name+"-bootstrap.json")
	if err := os.WriteFile(bootPath, boot, 0o644); err != nil {
		return err
	}
	concurrency := s.cfg.EnvoyConcurrency
	if concurrency <= 0 {
		concurrency = 2
	}
	env := []string{xds.NATSProxySeedEnv + "=" + s.security.proxySeed}
	e, err := s.startProcess(name, env, s.tool("envoy"), "-c", bootPath,
		"--concurrency", strconv.Itoa(concurrency), "--disable-hot-restart",
		"--log-level", "warn", "--component-log-level", "wasm:info",
		"--drain-time-s", "2")
	if err != nil {
		return err
	}
	if replica == 0 {
		s.Envoy = e
	}
	s.Envoys = append(s.Envoys, e)
	s.procs = append(s.procs, e)
	if err := waitHTTP(e, "http://"+addr(admin)+"/ready", startTimeout); err != nil {
		return err
	}
	if err := s.WaitInSync(startTimeout); err != nil {
		return err
	}
	listeners := []int{p.NATS}
	if s.cfg.WithKafka {
		listeners = append(listeners, s.kafkaGatewayListeners()...)
	}
	listeners = append(listeners, p.NATSTLS)
	for _, port := range listeners {
		if err := waitTCP(e, addr(port+replica), startTimeout); err != nil {
			return err
		}
	}
	return nil
}

// Status is the part of the control plane's /status the stack reads.
type Status struct {
	Active *struct {
		Version string `json:"version"`
	} `json:"active"`
	LastError *struct {
		File   string   `json:"file"`
		Line   int      `json:"line"`
		Errors []string `json:"errors"`
	} `json:"lastError"`
	Nodes []NodeStatus `json:"nodes"`
	Quota *struct {
		Reachable bool   `json:"reachable"`
		Enforcing string `json:"enforcing"`
	} `json:"quota"`
}

// NodeStatus is one Envoy node as /status reports it.
type NodeStatus struct {
	ID            string `json:"id"`
	Connected     bool   `json:"connected"`
	AckedVersion  string `json:"ackedVersion"`
	AckedSnapshot string `json:"ackedSnapshot"`
	NackedVersion string `json:"nackedVersion"`
	NackReason    string `json:"nackReason"`
}

// ControlPlaneStatus fetches /status.
func (s *Stack) ControlPlaneStatus() (Status, error) {
	var st Status
	resp, err := http.Get("http://" + addr(s.cfg.Ports.ControlPlane) + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// WaitInSync waits until every connected Envoy has acknowledged the active policy version,
// and all of them the same snapshot of it (the same live replica count).
func (s *Stack) WaitInSync(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		st, err := s.ControlPlaneStatus()
		if err == nil && st.Active != nil {
			// A node the control plane only knows by its workers' polls (its xDS stream not
			// back yet) is not connected: some node must be.
			inSync := slices.ContainsFunc(st.Nodes, func(n NodeStatus) bool { return n.Connected })
			snapshot := ""
			for _, n := range st.Nodes {
				if !n.Connected {
					continue
				}
				if n.AckedVersion != st.Active.Version || n.NackedVersion == st.Active.Version || (snapshot != "" && n.AckedSnapshot != snapshot) {
					inSync = false
					last = fmt.Sprintf("node %s acked %q (snapshot %q, nacked %q: %s), active %q", n.ID, n.AckedVersion, n.AckedSnapshot, n.NackedVersion, n.NackReason, st.Active.Version)
				}
				snapshot = n.AckedSnapshot
			}
			if inSync {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("envoy did not acknowledge the active policy within %s: %s", timeout, last)
}

func waitTCP(p *process, address string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited before listening on %s: %v", p.name, address, p.err)
		}
		c, err := net.DialTimeout("tcp", address, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not listening on %s after %s", p.name, address, timeout)
}

func waitHTTP(p *process, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited: %v", p.name, p.err)
		}
		resp, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New(p.name + " not ready at " + url)
}

// randomClusterID is a Kafka cluster id: 16 random bytes, base64url without padding. One in 64
// starts with '-', which StorageTool's argument parser takes for an option: draw again.
func randomClusterID() string {
	b := make([]byte, 16)
	for {
		_, _ = rand.Read(b)
		if id := base64.RawURLEncoding.EncodeToString(b); id[0] != '-' {
			return id
		}
	}
}

// Exited reports the name of the first process that exits for good (a supervised one only if
// it could not be started again).
func (s *Stack) Exited() <-chan string {
	ch := make(chan string, 1)
	for _, p := range s.procs {
		go func(p *process) {
			<-p.done
			select {
			case ch <- p.name:
			default:
			}
		}(p)
	}
	return ch
}
