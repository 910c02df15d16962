// Package machine describes the machine a result was measured on — cores, load and how busy
// the CPUs were during the run — because a latency figure without the load it was measured
// under cannot be compared with anything.
package machine

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Load is the machine's state over one measurement.
type Load struct {
	Cores int `json:"cores"`
	// LoadAvgBefore and LoadAvgAfter are /proc/loadavg's 1, 5 and 15 minute figures.
	LoadAvgBefore [3]float64 `json:"loadAvgBefore"`
	LoadAvgAfter  [3]float64 `json:"loadAvgAfter"`
	// CPUBusyPercent is the share of all cores' time not idle during the measurement.
	CPUBusyPercent float64 `json:"cpuBusyPercent"`
	Seconds        float64 `json:"seconds"`
}

// Measurement is a Load being measured.
type Measurement struct {
	load      Load
	busy, all uint64
	start     time.Time
}

// Start begins measuring.
func Start() *Measurement {
	m := &Measurement{start: time.Now()}
	m.load.Cores = runtime.NumCPU()
	m.load.LoadAvgBefore = loadAvg()
	m.busy, m.all = cpuTimes()
	return m
}

// Stop ends the measurement.
func (m *Measurement) Stop() Load {
	busy, all := cpuTimes()
	if all > m.all {
		m.load.CPUBusyPercent = 100 * float64(busy-m.busy) / float64(all-m.all)
	}
	m.load.LoadAvgAfter = loadAvg()
	m.load.Seconds = time.Since(m.start).Seconds()
	return m.load
}

// String is the one-line form every report prints.
func (l Load) String() string {
	return fmt.Sprintf("%d cores, load average %.2f → %.2f (1 min), CPU %.0f%% busy", l.Cores, l.LoadAvgBefore[0], l.LoadAvgAfter[0], l.CPUBusyPercent)
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

// cpuTimes reads the aggregate line of /proc/stat: time spent busy and in total (jiffies).
func cpuTimes() (busy, all uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		all += n
		if i != 3 && i != 4 { // idle and iowait
			busy += n
		}
	}
	return busy, all
}
