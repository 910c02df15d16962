package localstack

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// restartDelay is how long a supervised process stays down before it is started again: long
// enough that a crash loop does not spin, short enough that a test of the outage is quick.
const restartDelay = time.Second

// process is one child started by the stack, in its own process group so that stopping it
// also stops anything it spawned. A supervised process that exits on its own is started again
// with the same command, as a Kubernetes Deployment would; done closes only when it has
// stopped for good.
type process struct {
	name       string
	logPath    string
	env        []string
	bin        string
	args       []string
	supervised bool

	mu       sync.Mutex
	cmd      *exec.Cmd
	stopping atomic.Bool
	restarts atomic.Int64
	// held, while set, keeps the supervisor from starting the process again until it closes
	// (an outage a test needs to last while it checks).
	held chan struct{}
	done chan struct{}
	err  error
}

// startProcess starts one of the stack's processes, supervised if the stack is.
func (s *Stack) startProcess(name string, env []string, bin string, args ...string) (*process, error) {
	return launch(&process{name: name, logPath: filepath.Join(s.logDir, name+".log"), env: env, bin: bin, args: args, supervised: s.cfg.Supervise}, os.O_TRUNC)
}

// again starts a stopped process's command anew, as a new process whose output is appended to
// the same log: what led to the restart stays readable.
func (p *process) again() (*process, error) {
	return launch(&process{name: p.name, logPath: p.logPath, env: p.env, bin: p.bin, args: p.args, supervised: p.supervised}, 0)
}

// restart stops old (SIGTERM, SIGKILL after grace) and starts its command again as a new
// process, which takes old's place among the stack's processes (Stop stops it); a rollout's
// restart of one member of a cluster.
func (s *Stack) restart(old *process, grace time.Duration) (*process, error) {
	old.stop(grace)
	next, err := old.again()
	if err != nil {
		return nil, err
	}
	for j, p := range s.procs {
		if p == old {
			s.procs[j] = next
		}
	}
	return next, nil
}

// launch starts p, its log truncated first if mode has os.O_TRUNC.
func launch(p *process, mode int) (*process, error) {
	p.done = make(chan struct{})
	cmd, logFile, err := p.run(mode)
	if err != nil {
		return nil, err
	}
	p.cmd = cmd
	go p.wait(cmd, logFile)
	return p, nil
}

// run starts the command once, its output appended to (or, first, truncating) the log.
func (p *process) run(mode int) (*exec.Cmd, *os.File, error) {
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND|mode, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", p.name, err)
	}
	return cmd, logFile, nil
}

// wait follows the process through its exits: a supervised one that was not stopped is started
// again after restartDelay.
func (p *process) wait(cmd *exec.Cmd, logFile *os.File) {
	for {
		err := cmd.Wait()
		if !p.supervised || p.stopping.Load() {
			logFile.Close()
			p.err = err
			close(p.done)
			return
		}
		fmt.Fprintf(logFile, "\n[weighstation local stack] %s exited (%v); starting it again in %s\n", p.name, err, restartDelay)
		logFile.Close()
		time.Sleep(restartDelay)
		p.mu.Lock()
		for held := p.held; held != nil; held = p.held {
			p.mu.Unlock()
			<-held
			p.mu.Lock()
		}
		if p.stopping.Load() {
			p.mu.Unlock()
			p.err = err
			close(p.done)
			return
		}
		next, nextLog, startErr := p.run(0)
		if startErr != nil {
			p.mu.Unlock()
			p.err = startErr
			close(p.done)
			return
		}
		p.cmd, cmd, logFile = next, next, nextLog
		p.restarts.Add(1)
		p.mu.Unlock()
	}
}

// KillAndHold kills the process (SIGKILL) and keeps the supervisor from starting it again until
// release is called; release starts it (after restartDelay) as a crash would. It returns once
// the process is gone (exited, its sockets closed): until then the kernel still completes
// connections to its listeners, which the dying process then resets (seen once: the first of
// 30 clients connected right after the kill was reset).
func (p *process) KillAndHold() (release func(), err error) {
	held := make(chan struct{})
	p.mu.Lock()
	p.held = held
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); !gone(pid) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.held = nil
			p.mu.Unlock()
			close(held)
		})
	}, nil
}

// Restarts is how many times the supervisor started the process again.
func (p *process) Restarts() int64 { return p.restarts.Load() }

// PID is the process id of the running instance (it changes when the supervisor restarts it).
func (p *process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace; a supervised process is
// not started again.
func (p *process) stop(grace time.Duration) {
	p.stopping.Store(true)
	if p.exited() {
		return
	}
	p.mu.Lock()
	pgid := -p.cmd.Process.Pid
	p.mu.Unlock()
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
}

// Signal sends sig to the process (not its group): tests use SIGSTOP/SIGCONT, and SIGKILL to
// crash it (a supervised process then comes back).
func (p *process) Signal(sig syscall.Signal) error {
	if p.exited() {
		return errors.New(p.name + " has exited")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Signal(sig)
}

// gone: the process has exited (it is no more, or a zombie whose descriptors are closed).
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state …: the state follows the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z'
}
