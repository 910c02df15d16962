package engine

import (
	"syscall"
	"time"
)

// nanosleepUntil blocks the calling OS thread until t. Go's own timers wake about 1 ms late on
// Linux (the scheduler sleeps in epoll with millisecond timeouts), which would make every send
// up to 1 ms late; a plain nanosleep on a thread of its own wakes within ~0.1 ms. Long sleeps
// are cut short by maxNap so a cancelled run notices within that.
func nanosleepUntil(t time.Time, maxNap time.Duration) {
	d := min(time.Until(t), maxNap)
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
		// interrupted by a signal (the runtime's preemption): sleep for what remains
	}
}
