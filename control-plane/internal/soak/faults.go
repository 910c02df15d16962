package soak

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/localstack"
)

// Fault is one scheduled fault: at a fraction of the run, what it does.
type Fault struct {
	At   float64
	Name string
	run  func(f *faults) (Window, error)
}

// Fault kinds a window is tagged with, for the flows they affect.
const (
	faultEnvoy = "envoy restarted (drain)"
	faultNATS  = "nats-server killed"
	faultKafka = "kafka killed"
	faultCP    = "control plane killed"
)

// Schedule is the fault schedule, by fraction of the run: Envoy drained and restarted early (so
// most of the run is one Envoy lifetime, for the resource curves), the control plane killed
// twice, nats-server and Kafka once each. Policy flips run every FlipEvery beside them.
var Schedule = []Fault{
	{At: 0.15, Name: faultEnvoy, run: (*faults).restartEnvoy},
	{At: 0.35, Name: faultCP, run: (*faults).killControlPlane},
	{At: 0.50, Name: faultNATS, run: (*faults).killNATS},
	{At: 0.65, Name: faultKafka, run: (*faults).killKafka},
	{At: 0.80, Name: faultCP, run: (*faults).killControlPlane},
}

// FlipEvery is how often the policy moves to its next step.
const FlipEvery = 10 * time.Second

// recoveryGrace widens a data-path fault's window past the component's return: clients take a
// moment to notice, reconnect and resend.
const recoveryGrace = 3 * time.Second

// Event is something the schedule did, for the report.
type Event struct {
	At     time.Duration // since the load started
	What   string
	Took   time.Duration // until the component was back (and, for the control plane, in sync)
	Detail string
}

// faults runs the schedule against the stack and writes the policy flips.
type faults struct {
	stack     *localstack.Stack
	ports     localstack.Ports
	policyDir string
	scraper   *Scraper
	start     time.Time

	mu      sync.Mutex
	step    PolicyStep
	flips   int
	steps   []StepAt
	windows []Window
	events  []Event
	errs    []error
}

// flip writes the soak's policy at its next step.
func (f *faults) flip() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.step = f.step.Next()
	f.flips++
	f.steps = append(f.steps, StepAt{At: time.Now(), Step: f.step})
	return writeFile(filepath.Join(f.policyDir, "soak.yaml"), PolicyYAML(f.step))
}

func writeFile(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (f *faults) record(e Event, w Window, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e.At = w.Start.Sub(f.start).Round(100 * time.Millisecond)
	if err != nil {
		f.errs = append(f.errs, fmt.Errorf("%s at %s: %w", e.What, e.At, err))
		e.Detail = "FAILED: " + err.Error()
	}
	f.events = append(f.events, e)
	switch e.What {
	case faultEnvoy, faultNATS, faultKafka:
		// The control plane is not on the data path: its outages excuse no failure.
		w.End = w.End.Add(recoveryGrace)
		f.windows = append(f.windows, w)
	}
}

// run follows the schedule over a run of the given length, and flips the policy every
// FlipEvery, until stop closes.
func (f *faults) run(d time.Duration, stop <-chan struct{}) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every(FlipEvery, stop, func() {
			if err := f.flip(); err != nil {
				f.record(Event{What: "policy flip"}, Window{Start: time.Now()}, err)
			}
		})
	}()
	for _, fault := range Schedule {
		select {
		case <-stop:
			wg.Wait()
			return
		case <-time.After(time.Until(f.start.Add(time.Duration(fault.At * float64(d))))):
		}
		begin := time.Now()
		w, err := fault.run(f)
		w.What = fault.Name
		if w.Start.IsZero() {
			w.Start = begin
		}
		f.record(Event{What: fault.Name, Took: w.End.Sub(begin).Round(10 * time.Millisecond)}, w, err)
	}
	wg.Wait()
}

// restartEnvoy drains Envoy's listeners, stops it (SIGTERM) and waits for the supervisor's new
// Envoy to be ready and in sync. Its counters are read just before it stops.
func (f *faults) restartEnvoy() (Window, error) {
	w := Window{Start: time.Now()}
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/drain_listeners?graceful", f.ports.Admin), "text/plain", nil)
	if err != nil {
		return w, err
	}
	resp.Body.Close()
	time.Sleep(2500 * time.Millisecond) // the stack's --drain-time-s 2
	restarts := f.stack.Envoy.Restarts()
	if err := f.scraper.Scrape(); err != nil {
		return w, fmt.Errorf("reading Envoy's counters before it stops: %w", err)
	}
	if err := f.stack.Envoy.Signal(syscall.SIGTERM); err != nil {
		return w, err
	}
	err = waitFor(60*time.Second, func() bool {
		if f.stack.Envoy.Restarts() == restarts || !httpOK(fmt.Sprintf("http://127.0.0.1:%d/ready", f.ports.Admin)) {
			return false
		}
		return f.stack.WaitInSync(100*time.Millisecond) == nil && tcpUp(f.ports.NATS) && tcpUp(f.ports.Kafka)
	})
	w.End = time.Now()
	return w, err
}

// killControlPlane kills the control plane, writes the next policy step while it is down, and
// waits until it is back and every Envoy acknowledged that policy (/status).
func (f *faults) killControlPlane() (Window, error) {
	w := Window{Start: time.Now()}
	st, err := f.stack.ControlPlaneStatus()
	if err != nil || st.Active == nil {
		return w, fmt.Errorf("reading /status before the kill: %v", err)
	}
	before := st.Active.Version
	if err := f.stack.ControlPlane.Signal(syscall.SIGKILL); err != nil {
		return w, err
	}
	if err := waitFor(5*time.Second, func() bool { _, err := f.stack.ControlPlaneStatus(); return err != nil }); err != nil {
		return w, fmt.Errorf("the control plane still answers after SIGKILL")
	}
	if err := f.flip(); err != nil {
		return w, err
	}
	err = waitFor(60*time.Second, func() bool {
		st, err := f.stack.ControlPlaneStatus()
		if err != nil || st.Active == nil || st.Active.Version == before || len(st.Nodes) == 0 {
			return false
		}
		for _, n := range st.Nodes {
			if !n.Connected || n.AckedVersion != st.Active.Version {
				return false
			}
		}
		return true
	})
	w.End = time.Now()
	return w, err
}

func (f *faults) killNATS() (Window, error) {
	return f.killAndWait(f.stack.NATSServer, f.ports.NATSUpstream, 30*time.Second)
}

func (f *faults) killKafka() (Window, error) {
	return f.killAndWait(f.stack.Kafka, f.ports.KafkaDirect, 90*time.Second)
}

// supervised is a process of the stack that is started again when it exits.
type supervised interface {
	Signal(syscall.Signal) error
	Restarts() int64
}

// killAndWait kills a broker (SIGKILL) and waits until the supervisor's new one listens.
func (f *faults) killAndWait(p supervised, port int, timeout time.Duration) (Window, error) {
	w := Window{Start: time.Now()}
	restarts := p.Restarts()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return w, err
	}
	err := waitFor(timeout, func() bool { return p.Restarts() > restarts && tcpUp(port) })
	w.End = time.Now()
	return w, err
}

func (f *faults) results() ([]Window, []Event, []error, []StepAt) {
	f.mu.Lock()
	defer f.mu.Unlock()
	events := append([]Event(nil), f.events...)
	sort.Slice(events, func(i, j int) bool { return events[i].At < events[j].At })
	steps := append([]StepAt{{At: f.start, Step: StepBase}}, f.steps...)
	return append([]Window(nil), f.windows...), events, append([]error(nil), f.errs...), steps
}

func waitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not recovered within %s", timeout)
}

func tcpUp(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func httpOK(url string) bool {
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
