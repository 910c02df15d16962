package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one of the node's processes, started with its output in a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func startProcess(logs, name, bin string, args ...string) (*process, error) {
	f, err := os.Create(filepath.Join(logs, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process's PID, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// becomeSubreaper makes this process the parent of every orphan below it: containerd's shims
// daemonize, and without this they and the containers under them would escape to PID 1 and
// could not be found by walking this process's descendants.
func becomeSubreaper() error {
	const prSetChildSubreaper = 36
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %v", e)
	}
	return nil
}

// descendants lists every process below pid, deepest last.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// killDescendants SIGKILLs every process below this one but those kept, by PID, until none is
// left (a dying shim's containers are reparented to this process as they go), and reaps them.
func killDescendants(keep map[int]bool) {
	for round := 0; round < 50; round++ {
		var left []int
		for _, p := range descendants(os.Getpid()) {
			if !keep[p] && !zombie(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
		reapOrphans(keep)
	}
}

func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// reapOrphans waits for the exited children this process adopted (not the ones it started,
// whose exec.Cmd waits for them).
func reapOrphans(keep map[int]bool) {
	for _, p := range descendants(os.Getpid()) {
		if !keep[p] && zombie(p) {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p, &ws, syscall.WNOHANG, nil)
		}
	}
}
