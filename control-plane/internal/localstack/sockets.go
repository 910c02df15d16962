package localstack

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ssUser reads the process of a socket from `ss -p`: users:(("envoy",pid=123,fd=45)).
var ssUser = regexp.MustCompile(`users:\(\("([^"]+)",pid=(\d+)`)

// foreignConnections lists the established client connections to any of ports (a server's
// listeners) that belong to neither one of the stack's Envoys nor this process (a test's
// baseline verifier, the stack's own admin client), from the servers' side of the kernel: on
// loopback every address is 127.0.0.1, so only the owning process tells. gateway holds the
// connections (local and peer address) seen as the gateway's in earlier samples: one listed
// later with no owner is still the gateway's (seen once, while a broker was killed -9: an
// Envoy's connection to it, its Send-Q full, listed with no process for 0.75 s).
func (s *Stack) foreignConnections(ports []int, gateway map[string]bool) (foreign []string, unheld int, err error) {
	filter := make([]string, len(ports))
	for i, p := range ports {
		filter[i] = fmt.Sprintf("dport = :%d", p)
	}
	out, err := exec.Command("ss", "-tnpeH", "state", "established", "( "+strings.Join(filter, " or ")+" )").Output()
	if err != nil {
		return nil, 0, fmt.Errorf("ss: %w", err)
	}
	envoys := map[int]bool{}
	for _, e := range s.Envoys {
		envoys[e.PID()] = true
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		conn := ""
		if len(fields) >= 4 {
			conn = fields[2] + " " + fields[3]
		}
		switch {
		case ssUser.MatchString(line) && ownedByTheGateway(line, envoys):
			gateway[conn] = true
		case gateway[conn]:
		case !ownedByTheGateway(line, envoys):
			pid, comm := inodeOwner(line)
			if pid == 0 {
				unheld++
				continue
			}
			foreign = append(foreign, line+fmt.Sprintf(" (held by %s, pid %d)", comm, pid))
		}
	}
	return foreign, unheld, nil
}

// ownedByTheGateway says whether a socket of `ss -tnpeH` output belongs to an Envoy or to this
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
		again, err := exec.Command("ss", "-tnpeH", "state", "established", "( sport = :"+port+" )").Output()
		if err != nil {
			return false
		}
		again = bytes.TrimSpace(again)
		if len(again) == 0 || ssUser.Match(again) {
			return len(again) == 0 || ownedByTheGateway(string(again), envoys)
		}
		// Unmapped twice: the inode names the process in /proc.
		pid, comm := inodeOwner(line)
		return pid > 0 && (comm == "envoy" || envoys[pid] || pid == os.Getpid())
	}
	pid, _ := strconv.Atoi(m[2])
	return m[1] == "envoy" || envoys[pid] || pid == os.Getpid()
}

// ConnectionWatch samples foreignConnections every 250 ms until Stop.
type ConnectionWatch struct {
	stop    chan struct{}
	done    chan struct{}
	samples int
	foreign []string
	unheld  int
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
		gateway := map[string]bool{}
		for {
			f, unheld, err := s.foreignConnections(ports(), gateway)
			if err != nil {
				w.err = err
				return
			}
			w.samples++
			w.foreign = append(w.foreign, f...)
			w.unheld += unheld
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// Stop ends the watch: how many samples it took, every foreign connection it saw, and how
// many sockets held by no process (inodeOwner) it passed over.
func (w *ConnectionWatch) Stop() (samples int, foreign []string, unheld int, err error) {
	close(w.stop)
	<-w.done
	return w.samples, w.foreign, w.unheld, w.err
}

var ssInode = regexp.MustCompile(` ino:(\d+) `)

// inodeOwner finds the process holding a socket of `ss -e` output by its inode in the
// processes' descriptors. None (pid 0): no process can read or write it, so no client is
// connected through it. Seen in broker faults: a connection to a broker that went down with a
// request unacknowledged in its Send-Q, still ESTABLISHED, its inode in no process's
// descriptors, while the kernel retransmits.
func inodeOwner(line string) (pid int, comm string) {
	m := ssInode.FindStringSubmatch(line)
	if m == nil || m[1] == "0" {
		return 0, ""
	}
	target := "socket:[" + m[1] + "]"
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if link, err := os.Readlink(fd); err == nil && link == target {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			name, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			return pid, strings.TrimSpace(string(name))
		}
	}
	return 0, ""
}
