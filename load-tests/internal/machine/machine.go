// Package machine describes the machine a result was measured on — cores, load and how busy
// the CPUs were during the run — because a latency figure without the load it was measured
// under cannot be compared with anything.
package machine

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/hist"
)

// Load is the machine's state over one measurement.
type Load struct {
	Cores int `json:"cores"`
	// LoadAvgBefore and LoadAvgAfter are /proc/loadavg's 1, 5 and 15 minute figures.
	LoadAvgBefore [3]float64 `json:"loadAvgBefore"`
	LoadAvgAfter  [3]float64 `json:"loadAvgAfter"`
	// CPUBusyPercent is the share of all cores' time spent running (neither idle nor stolen)
	// during the measurement.
	CPUBusyPercent float64 `json:"cpuBusyPercent"`
	// StealPercent is the share of all cores' time the hypervisor gave to other machines: on a
	// virtual machine, time this one wanted to run and could not.
	StealPercent float64 `json:"stealPercent"`
	// ProcessCPUPercent is each watched process's CPU use during the measurement, in percent of
	// one core (so up to 100 × cores): the harness itself, and the stack's processes when known.
	// On a virtual machine it includes time stolen from the process while it ran.
	ProcessCPUPercent map[string]float64 `json:"processCpuPercent,omitempty"`
	Seconds           float64            `json:"seconds"`
	// WakeupLatenessMicros is how late a sleeping thread woke just before the measurement (see
	// WakeupLateness): the floor under every latency and under the harness's punctuality.
	WakeupLatenessMicros hist.Percentiles `json:"wakeupLatenessMicros"`
}

// Measurement is a Load being measured.
type Measurement struct {
	load  Load
	cpu   cpuTimes
	start time.Time
	watch map[string]int
	ticks map[string]uint64
}

// wakeupProbe is the nap count and length of the wake-up probe before each measurement
// (about half a second).
const (
	wakeupNaps = 1000
	wakeupNap  = 200 * time.Microsecond
)

// Start probes the machine's wake-up lateness, then begins measuring. watch names processes
// (by PID) whose CPU use to record besides the harness's own.
func Start(watch map[string]int) *Measurement {
	wakeup := WakeupLateness(wakeupNaps, wakeupNap)
	m := &Measurement{start: time.Now(), watch: map[string]int{"harness": os.Getpid()}, ticks: map[string]uint64{}}
	m.load.WakeupLatenessMicros = wakeup
	for name, pid := range watch {
		m.watch[name] = pid
	}
	m.load.Cores = runtime.NumCPU()
	m.load.LoadAvgBefore = loadAvg()
	for name, pid := range m.watch {
		m.ticks[name] = processTicks(pid)
	}
	m.cpu = readCPUTimes()
	return m
}

// Stop ends the measurement.
func (m *Measurement) Stop() Load {
	now := readCPUTimes()
	if all := now.all - m.cpu.all; all > 0 {
		m.load.CPUBusyPercent = 100 * float64(now.busy-m.cpu.busy) / float64(all)
		m.load.StealPercent = 100 * float64(now.steal-m.cpu.steal) / float64(all)
	}
	m.load.LoadAvgAfter = loadAvg()
	m.load.Seconds = time.Since(m.start).Seconds()
	m.load.ProcessCPUPercent = map[string]float64{}
	for name, pid := range m.watch {
		used := float64(processTicks(pid)-m.ticks[name]) / clockTicks
		m.load.ProcessCPUPercent[name] = 100 * used / m.load.Seconds
	}
	return m.load
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux architecture Go
// supports (the kernel fixes it for user space regardless of its internal HZ).
const clockTicks = 100

// processTicks reads a process's user+system CPU time from /proc/PID/stat (fields 14 and 15;
// the command name in field 2 may contain spaces, so fields are counted after its ")").
func processTicks(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	return utime + stime
}

// String is the one-line form every report prints.
func (l Load) String() string {
	s := fmt.Sprintf("%d cores, load average %.2f → %.2f (1 min), CPU %.0f%% busy, %.0f%% stolen by the hypervisor", l.Cores, l.LoadAvgBefore[0], l.LoadAvgAfter[0], l.CPUBusyPercent, l.StealPercent)
	names := make([]string, 0, len(l.ProcessCPUPercent))
	for n := range l.ProcessCPUPercent {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		s += fmt.Sprintf("%s%s %.0f%%", sep, n, l.ProcessCPUPercent[n])
	}
	if len(names) > 0 {
		s += " of a core)"
	}
	if w := l.WakeupLatenessMicros; w.Count > 0 {
		s += fmt.Sprintf("; a sleeping thread wakes %.2f ms late at p99 (max %.2f)", float64(w.P99)/1000, float64(w.Max)/1000)
	}
	return s
}

func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i == 3 {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}

// cpuTimes are the aggregate line of /proc/stat, in jiffies.
type cpuTimes struct{ busy, steal, all uint64 }

// readCPUTimes reads them: busy is everything but idle, iowait and steal.
func readCPUTimes() cpuTimes {
	var t cpuTimes
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return t
	}
	// user nice system idle iowait irq softirq steal guest guest_nice; guest time is already
	// counted in user, so only the first eight add up to the total.
	for i, v := range f[1:min(len(f), 9)] {
		n, _ := strconv.ParseUint(v, 10, 64)
		t.all += n
		switch i {
		case 3, 4: // idle, iowait
		case 7:
			t.steal += n
		default:
			t.busy += n
		}
	}
	return t
}
