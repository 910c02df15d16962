package localstack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// natsConfig: the upstream nats-server with the users of contract §1 (or, in operator mode,
// an operator and one account whose users bring user JWTs). Its max_payload is above
// any tenant's limit so the gateway, not the server, is where size limits are decided; `anon`
// is also the user of connections that send no credentials. The gateway is a trusted proxy, and
// every user a tenant may be known by (the password users, anon, the nkey users) is
// proxy_required: nats-server admits them only through the gateway, so no tenant goes around
// its limits. Benchmarks and tests reach nats-server directly as BaselineNATSUser, which
// belongs to no tenant.
//
// With more than one server (Config.NATSServers) each is a member of one cluster with
// JetStream: a server_name of its own (JetStream's Raft groups name their peers by it), its own
// store_dir, and routes to every other member. The members advertise their client addresses in
// INFO (connect_urls), nats-server's default: a real cluster behind the gateway does, and what
// the gateway tells its clients of them is the gateway's to decide (no tenant's user is admitted
// at a member directly: proxy_required). Lame duck mode takes nats-server's minimum of 30 s
// instead of its default 2 min, so that a test of a rolling restart (LameDuckNATSServer) is
// quick. With one server the configuration is what it always was: no cluster, store_dir
// jetstream. The operator mode's memory resolver serves a cluster as well: every member preloads
// the same account JWTs.
var natsConfig = template.Must(template.New("nats").Parse(`{{with .Cluster}}server_name: {{.Name}}
{{end}}listen: "127.0.0.1:{{.Port}}"
http: "127.0.0.1:{{.MonitorPort}}"
max_payload: 8MB
max_pending: 64MB
{{- with .Cluster}}
lame_duck_duration: 30s
lame_duck_grace_period: 2s
{{- end}}
{{- with .Operator}}
operator: "{{.OperatorJWT}}"
system_account: {{.SystemPub}}
resolver: MEMORY
resolver_preload: {
  {{.SystemPub}}: "{{.SystemJWT}}"
  {{.AccountPub}}: "{{.AccountJWT}}"
}
{{- else}}
no_auth_user: anon
authorization {
  users = [
    {user: acme, password: acme-secret, proxy_required: true}
    {user: globex, password: globex-secret, proxy_required: true}
    {user: anon, password: "", proxy_required: true}
{{- range .ExtraUsers}}
    {user: {{.}}, password: {{.}}-secret, proxy_required: true}
{{- end}}
    {user: {{.Baseline}}, password: {{.Baseline}}-secret}
{{- range .NkeyUsers}}
    {nkey: {{.}}, proxy_required: true}
{{- end}}
  ]
}
{{- end}}
proxies {
  trusted: [ {key: {{.ProxyKey}}} ]
}
{{- if .TLSDir}}
tls {
  cert_file: "{{.TLSDir}}/broker.crt"
  key_file: "{{.TLSDir}}/broker.key"
  handshake_first: true
}
{{- end}}
{{- with .Cluster}}
cluster {
  name: weighstation
  listen: "127.0.0.1:{{.Port}}"
  routes: [
{{- range .Routes}}
    "nats-route://127.0.0.1:{{.}}"
{{- end}}
  ]
}
{{- end}}
jetstream {
  store_dir: "{{.Dir}}/{{.Store}}"
  max_memory_store: 256MB
  max_file_store: 1GB
}
`))

// natsClusterMember is one server's place in the cluster.
type natsClusterMember struct {
	Name   string
	Port   int   // its route listener
	Routes []int // the other members' route listeners
}

// natsServerCount is how many nats-servers the stack runs.
func (c Config) natsServerCount() int { return max(c.NATSServers, 1) }

// natsServerName names server i's process, configuration and log: as it always was with one.
func (c Config) natsServerName(i int) string {
	if c.natsServerCount() == 1 {
		return "nats-server"
	}
	return "nats-server-" + strconv.Itoa(i)
}

// renderNATSConfig is server i's configuration file.
func (s *Stack) renderNATSConfig(i int) ([]byte, error) {
	p := s.cfg.Ports
	data := map[string]any{
		"Port": p.NATSUpstream + i, "MonitorPort": p.NATSMonitor + i, "Dir": s.cfg.WorkDir, "Store": "jetstream",
		"ExtraUsers": s.cfg.ExtraNATSUsers, "NkeyUsers": s.security.nkeyUsers, "ProxyKey": s.security.proxyPublic,
		"TLSDir": "", "Operator": nil, "Cluster": nil, "Baseline": BaselineNATSUser,
	}
	if o := s.operator; o != nil {
		data["Operator"] = map[string]string{"OperatorJWT": o.operatorJWT, "SystemPub": o.systemPub, "SystemJWT": o.systemJWT,
			"AccountPub": o.accountPub, "AccountJWT": o.accountJWT}
	}
	if s.cfg.NATSUpstreamTLS {
		data["TLSDir"] = s.tls.dir
	}
	if n := s.cfg.natsServerCount(); n > 1 {
		m := natsClusterMember{Name: "nats-" + strconv.Itoa(i), Port: p.NATSCluster + i}
		for j := range n {
			if j != i {
				m.Routes = append(m.Routes, p.NATSCluster+j)
			}
		}
		data["Cluster"] = m
		data["Store"] = "jetstream-" + strconv.Itoa(i)
	}
	var b bytes.Buffer
	err := natsConfig.Execute(&b, data)
	return b.Bytes(), err
}

// startNATS starts every server before it waits for any: a member's JetStream elects its meta
// leader only once the others are routed to it.
func (s *Stack) startNATS() error {
	for i := range s.cfg.natsServerCount() {
		p, err := s.startNATSServer(i)
		if err != nil {
			return err
		}
		s.NATSServers = append(s.NATSServers, p)
		s.procs = append(s.procs, p)
	}
	s.NATSServer = s.NATSServers[0]
	for i := range s.NATSServers {
		if err := s.WaitNATSServer(i, startTimeout); err != nil {
			return err
		}
	}
	return nil
}

func (s *Stack) startNATSServer(i int) (*process, error) {
	conf := "nats.conf"
	if s.cfg.natsServerCount() > 1 {
		conf = "nats-" + strconv.Itoa(i) + ".conf"
	}
	conf = filepath.Join(s.cfg.WorkDir, conf)
	b, err := s.renderNATSConfig(i)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(conf, b, 0o644); err != nil {
		return nil, err
	}
	return s.startProcess(s.cfg.natsServerName(i), nil, s.tool("nats-server"), "-c", conf)
}

// natsUpstreams is what the gateway is given as --nats-upstream: every server's client address,
// comma-separated seeds it balances across.
func (s *Stack) natsUpstreams() string {
	addrs := make([]string, s.cfg.natsServerCount())
	for i := range addrs {
		addrs[i] = s.NATSClientAddr(i)
	}
	return strings.Join(addrs, ",")
}

// NATSServerCount is how many nats-servers the stack runs (Config.NATSServers, at least one).
func (s *Stack) NATSServerCount() int { return s.cfg.natsServerCount() }

// NATSClientAddr is server i's client address (host:port), for direct connections as
// BaselineNATSUser.
func (s *Stack) NATSClientAddr(i int) string { return addr(s.cfg.Ports.NATSUpstream + i) }

// NATSMonitorURL is server i's monitoring endpoint (/varz, /connz, /jsz, /routez).
func (s *Stack) NATSMonitorURL(i int) string { return "http://" + addr(s.cfg.Ports.NATSMonitor+i) }

// NATSServerPID is the process id of server i's running instance: it changes when the
// supervisor starts the server again (after KillNATSServer's release or LameDuckNATSServer).
func (s *Stack) NATSServerPID(i int) int { return s.NATSServers[i].PID() }

// WaitNATSServer waits until server i accepts clients and, in a cluster, is routed to every
// other member and JetStream has a meta leader of all of them. After LameDuckNATSServer, wait
// for NATSServerPID to change first: until it exits the old instance is still routed.
func (s *Stack) WaitNATSServer(i int, timeout time.Duration) error {
	p, err := s.natsServer(i)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	if err := waitTCP(p, s.NATSClientAddr(i), timeout); err != nil {
		return err
	}
	if s.NATSServerCount() == 1 {
		return nil
	}
	return s.waitNATSClustered(p, i, time.Until(deadline))
}

// RestartNATSServer stops server i as a rollout does (SIGTERM, SIGKILL after stopGrace), starts
// it again with the same configuration and JetStream store, and waits until it is back in the
// cluster. Its *process is a new one, as RestartControlPlane's is. Not while KillNATSServer
// holds it down: release it first.
func (s *Stack) RestartNATSServer(i int) error {
	old, err := s.natsServer(i)
	if err != nil {
		return err
	}
	next, err := s.restart(old, stopGrace)
	if err != nil {
		return err
	}
	s.NATSServers[i] = next
	s.NATSServer = s.NATSServers[0]
	return s.WaitNATSServer(i, startTimeout)
}

// KillNATSServer kills server i (SIGKILL) and keeps it down until release is called; the
// supervisor then starts it again after restartDelay, as a crash would. It needs
// Config.Supervise: without a supervisor nothing would start the server again.
func (s *Stack) KillNATSServer(i int) (release func(), err error) {
	p, err := s.supervisedNATSServer(i)
	if err != nil {
		return nil, err
	}
	return p.KillAndHold()
}

// LameDuckNATSServer puts server i into lame duck mode (`nats-server --signal ldm=<pid>`), as a
// pod's preStop hook does: it stops accepting clients, hands its JetStream leaderships to the
// others, closes its clients over up to 30 s (in a cluster; nats-server's default 2 min with one
// server) and exits; the supervisor starts it again after restartDelay, as Kubernetes restarts
// the pod. It returns once the signal is sent. It needs Config.Supervise.
func (s *Stack) LameDuckNATSServer(i int) error {
	p, err := s.supervisedNATSServer(i)
	if err != nil {
		return err
	}
	out, err := exec.Command(s.tool("nats-server"), "--signal", "ldm="+strconv.Itoa(p.PID())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("lame duck mode for %s: %v: %s", p.name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (s *Stack) natsServer(i int) (*process, error) {
	if i < 0 || i >= len(s.NATSServers) {
		return nil, fmt.Errorf("no nats-server %d: the stack runs %d", i, len(s.NATSServers))
	}
	return s.NATSServers[i], nil
}

func (s *Stack) supervisedNATSServer(i int) (*process, error) {
	p, err := s.natsServer(i)
	if err == nil && !p.supervised {
		err = errors.New(p.name + " is not supervised (Config.Supervise): nothing would start it again")
	}
	return p, err
}

// natsClusterState is what the stack reads of a member's /routez and /jsz.
type natsClusterState struct {
	Routes []struct {
		RemoteID string `json:"remote_id"`
	} `json:"routes"`
	Meta *struct {
		Leader string `json:"leader"`
		Size   int    `json:"cluster_size"`
	} `json:"meta_cluster"`
}

// waitNATSClustered waits until server i has routes to every other member (counted by remote
// server: since 2.10 each pair of servers keeps a pool of several route connections) and sees
// a JetStream meta leader in a meta group of all of them.
func (s *Stack) waitNATSClustered(p *process, i int, timeout time.Duration) error {
	want := s.NATSServerCount()
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	last := "no answer"
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited before joining the cluster: %v", p.name, p.err)
		}
		var routez, jsz natsClusterState
		errR := getJSON(client, s.NATSMonitorURL(i)+"/routez", &routez)
		errJ := getJSON(client, s.NATSMonitorURL(i)+"/jsz", &jsz)
		if errR == nil && errJ == nil {
			peers := map[string]bool{}
			for _, r := range routez.Routes {
				peers[r.RemoteID] = true
			}
			if len(peers) == want-1 && jsz.Meta != nil && jsz.Meta.Leader != "" && jsz.Meta.Size == want {
				return nil
			}
			last = fmt.Sprintf("routed to %d of %d other servers", len(peers), want-1)
			if jsz.Meta != nil {
				last += fmt.Sprintf(", JetStream meta leader %q in a group of %d", jsz.Meta.Leader, jsz.Meta.Size)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not in a cluster of %d with a JetStream meta leader after %s: %s", p.name, want, timeout, last)
}

func getJSON(client *http.Client, url string, v any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
