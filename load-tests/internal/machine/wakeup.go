package machine

import (
	"runtime"
	"syscall"
	"time"

	"github.com/weighstation/weighstation/load-tests/internal/hist"
)

// WakeupLateness measures how late this machine wakes a thread that sleeps: n naps of nap on
// a locked OS thread (the way the harness's dispatcher sleeps), each one's overshoot recorded.
// On a virtual machine whose CPUs are mostly idle this can be milliseconds — the hypervisor
// wakes halted vCPUs late — and then the harness, and every broker thread, is late by as much.
func WakeupLateness(n int, nap time.Duration) hist.Percentiles {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := hist.NewRecorder()
	for range n {
		start := time.Now()
		ts := syscall.NsecToTimespec(int64(nap))
		_ = syscall.Nanosleep(&ts, nil)
		r.Record(time.Since(start) - nap)
	}
	return hist.PercentilesOf(r.Snapshot())
}
