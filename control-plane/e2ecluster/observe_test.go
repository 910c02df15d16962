package e2ecluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// gatewayAddrs are every gateway replica's NATS listener: what the local stack advertises to
// clients, and all a client may ever learn.
func gatewayAddrs() []string {
	var out []string
	for i := range replicas {
		out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.NATS+i)))
	}
	return out
}

// serverPorts are the ports of every nats-server: client, monitoring and cluster route ports.
// None may ever appear in what a client is told.
func serverPorts() []int {
	var out []int
	for i := range natsServers {
		out = append(out, ports.NATSUpstream+i, ports.NATSMonitor+i, ports.NATSCluster+i)
	}
	return out
}

// ssUser reads the process of a socket from `ss -p`: users:(("envoy",pid=123,fd=45)).
var ssUser = regexp.MustCompile(`users:\(\("([^"]+)",pid=(\d+)`)

// foreignConnections lists the client connections to any nats-server that belong to neither an
// Envoy process nor this test (its baseline verifier), from the servers' side of the kernel:
// on loopback every address is 127.0.0.1, so only the owning process tells.
func foreignConnections() ([]string, error) {
	var filter []string
	for i := range natsServers {
		filter = append(filter, fmt.Sprintf("dport = :%d", ports.NATSUpstream+i))
	}
	out, err := exec.Command("ss", "-tnpH", "state", "established", "( "+strings.Join(filter, " or ")+" )").Output()
	if err != nil {
		return nil, fmt.Errorf("ss: %w", err)
	}
	envoys := map[int]bool{}
	for _, e := range stack.Envoys {
		envoys[e.PID()] = true
	}
	var foreign []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		if !ownedByTheGateway(line, envoys) {
			foreign = append(foreign, line)
		}
	}
	return foreign, nil
}

// ownedByTheGateway says whether a socket of `ss -tnpH` output belongs to an Envoy or to this
// test. ss maps sockets to processes before it lists them, so a socket opened in between (an
// Envoy's health check, every second) is listed with no owner: such a socket is asked about
// again by its own port, and is the gateway's if it is gone by then (no client of a tenant
// holds a connection for a moment only) or now shows an Envoy.
func ownedByTheGateway(line string, envoys map[int]bool) bool {
	m := ssUser.FindStringSubmatch(line)
	if m == nil {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return false
		}
		_, port, _ := net.SplitHostPort(fields[2])
		again, err := exec.Command("ss", "-tnpH", "state", "established", "( sport = :"+port+" )").Output()
		if err != nil {
			return false
		}
		again = bytes.TrimSpace(again)
		return len(again) == 0 || (ssUser.Match(again) && ownedByTheGateway(string(again), envoys))
	}
	pid, _ := strconv.Atoi(m[2])
	return m[1] == "envoy" || envoys[pid] || pid == os.Getpid()
}

// connectionWatch samples foreignConnections until stopped.
type connectionWatch struct {
	stop    chan struct{}
	done    chan struct{}
	samples int
	foreign []string
	err     error
}

func watchConnections() *connectionWatch {
	w := &connectionWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			f, err := foreignConnections()
			if err != nil {
				w.err = err
				return
			}
			w.samples++
			w.foreign = append(w.foreign, f...)
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// check stops the watch and fails on any connection to a server that is not the gateway's.
func (w *connectionWatch) check(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	if w.err != nil {
		t.Fatal(w.err)
	}
	if len(w.foreign) > 0 {
		t.Errorf("%d connections to a nats-server around the gateway, e.g. %s", len(w.foreign), w.foreign[0])
	}
	t.Logf("server sockets sampled %d times: every client connection was an Envoy's or the baseline verifier's", w.samples)
}

// infoWatch is a raw client of the gateway that keeps every INFO it is sent (the first and the
// asynchronous ones that cluster changes bring), reconnecting when its connection drops.
type infoWatch struct {
	mu    sync.Mutex
	lines []string
	conns int
	stop  chan struct{}
	done  chan struct{}
}

func watchINFOs(user string) *infoWatch {
	w := &infoWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			w.session(user)
			select {
			case <-w.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

// session reads one connection's INFOs until it drops or the watch stops.
func (w *infoWatch) session(user string) {
	c, err := net.DialTimeout("tcp", gatewayAddrs()[0], time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	go func() {
		select {
		case <-w.stop:
		case <-w.done:
		}
		c.Close()
	}()
	connect, _ := json.Marshal(map[string]any{"user": user, "pass": user + "-secret", "verbose": false, "protocol": 1})
	r := bufio.NewReaderSize(c, 128<<10)
	for first := true; ; first = false {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch {
		case strings.HasPrefix(line, "INFO "):
			w.mu.Lock()
			w.lines = append(w.lines, strings.TrimSpace(line))
			w.conns += btoi(first)
			w.mu.Unlock()
			if first {
				fmt.Fprintf(c, "CONNECT %s\r\nPING\r\n", connect)
			}
		case strings.HasPrefix(line, "PING"):
			fmt.Fprint(c, "PONG\r\n")
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// check stops the watch and fails on any INFO that names anything but the gateway.
func (w *infoWatch) check(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.lines) == 0 {
		t.Fatal("no INFO was read through the gateway")
	}
	for _, line := range w.lines {
		if err := onlyTheGateway(line); err != nil {
			t.Errorf("%v: %s", err, line)
		}
	}
	t.Logf("%d INFOs over %d connections named only the gateway", len(w.lines), w.conns)
}

// afterColon finds every number after a colon: a port in "host:port" or a JSON number value.
var afterColon = regexp.MustCompile(`:(\d+)`)

// onlyTheGateway says what is wrong with an INFO line a client was sent, if anything.
func onlyTheGateway(line string) error {
	var info struct {
		Host        string   `json:"host"`
		Port        int      `json:"port"`
		IP          *string  `json:"ip"`
		ConnectURLs []string `json:"connect_urls"`
		WSURLs      []string `json:"ws_connect_urls"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "INFO ")), &info); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	gw := gatewayAddrs()
	servers := serverPorts()
	for _, m := range afterColon.FindAllStringSubmatch(line, -1) {
		if p, _ := strconv.Atoi(m[1]); slices.Contains(servers, p) {
			return fmt.Errorf("a server port (%d) is named", p)
		}
	}
	switch {
	case info.IP != nil || len(info.WSURLs) > 0:
		return fmt.Errorf("ip or ws_connect_urls kept")
	case !slices.Contains(gw, net.JoinHostPort(info.Host, strconv.Itoa(info.Port))):
		return fmt.Errorf("host:port %s:%d is no gateway listener", info.Host, info.Port)
	case !slices.Equal(info.ConnectURLs, gw):
		return fmt.Errorf("connect_urls %v, want the gateway's %v", info.ConnectURLs, gw)
	}
	return nil
}
