package e2ecluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
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

// natsServerPorts are every nats-server's client port.
func natsServerPorts() []int {
	out := make([]int, natsServers)
	for i := range out {
		out[i] = ports.NATSUpstream + i
	}
	return out
}

// connectionWatch samples the client connections to every nats-server.
type connectionWatch struct{ *localstack.ConnectionWatch }

func watchConnections() connectionWatch {
	return connectionWatch{stack.WatchConnections(natsServerPorts)}
}

// check stops the watch and fails on any connection to a server that is not the gateway's.
func (w connectionWatch) check(t *testing.T) {
	t.Helper()
	samples, foreign, unheld, err := w.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(foreign) > 0 {
		t.Errorf("%d connections to a nats-server around the gateway, e.g. %s", len(foreign), foreign[0])
	}
	t.Logf("server sockets sampled %d times: every client connection was an Envoy's or the baseline verifier's (%d sockets held by no process passed over)", samples, unheld)
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
