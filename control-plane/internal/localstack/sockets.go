package localstack

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ssUser reads the process of a socket from `ss -p`: users:(("envoy",pid=123,fd=45)).
var ssUser = regexp.MustCompile(`users:\(\("([^"]+)",pid=(\d+)`)

// ForeignConnections lists the established client connections to any of ports (a server's
// listeners) that belong to neither one of the stack's Envoys nor this process (a test's
// baseline verifier, the stack's own admin client), from the servers' side of the kernel: on
// loopback every address is 127.0.0.1, so only the owning process tells.
func (s *Stack) ForeignConnections(ports []int) ([]string, error) {
	filter := make([]string, len(ports))
	for i, p := range ports {
		filter[i] = fmt.Sprintf("dport = :%d", p)
	}
	out, err := exec.Command("ss", "-tnpH", "state", "established", "( "+strings.Join(filter, " or ")+" )").Output()
	if err != nil {
		return nil, fmt.Errorf("ss: %w", err)
	}
	envoys := map[int]bool{}
	for _, e := range s.Envoys {
		envoys[e.PID()] = true
	}
	var foreign []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !ownedByTheGateway(line, envoys) {
			foreign = append(foreign, line)
		}
	}
	return foreign, nil
}

// ownedByTheGateway says whether a socket of `ss -tnpH` output belongs to an Envoy or to this
// process. ss maps sockets to processes before it lists them, so a socket opened in between (an
// Envoy's health check, every second) is listed with no owner: such a socket is asked about
// again by its own port, and is the gateway's if it is gone by then (no client holds a
// connection for a moment only) or now shows an Envoy.
func ownedByTheGateway(line string, envoys map[int]bool) bool {
	m := ssUser.FindStringSubmatch(line)
	if m == nil {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return false
		}
		_, port, _ := net.SplitHostPort(fields[2])
		// A socket whose own port is a listener's is the server side of a connection not yet
		// accepted (it has no owner until then): its peer is some client's ephemeral port
		// that happens to be a watched one (a port kept for a broker not started yet), not a
		// client of a broker.
		if listening, err := exec.Command("ss", "-tlnH", "( sport = :"+port+" )").Output(); err == nil && len(bytes.TrimSpace(listening)) > 0 {
			return true
		}
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

// ConnectionWatch samples ForeignConnections every 250 ms until Stop.
type ConnectionWatch struct {
	stop    chan struct{}
	done    chan struct{}
	samples int
	foreign []string
	err     error
}

// WatchConnections starts sampling the connections to ports (ports may grow: it is called for
// each sample).
func (s *Stack) WatchConnections(ports func() []int) *ConnectionWatch {
	w := &ConnectionWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			f, err := s.ForeignConnections(ports())
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

// Stop ends the watch: how many samples it took, and every foreign connection it saw.
func (w *ConnectionWatch) Stop() (samples int, foreign []string, err error) {
	close(w.stop)
	<-w.done
	return w.samples, w.foreign, w.err
}
