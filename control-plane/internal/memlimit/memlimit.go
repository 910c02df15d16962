// Package memlimit gives the Go runtime a soft memory limit below the container's, so that the
// garbage collector works harder as the process nears its limit instead of leaving garbage for
// the kernel's OOM killer to find. With GOGC alone, a heap that settles at half the limit may
// still reach it between collections.
package memlimit

import (
	"errors"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// fraction of the container's limit the runtime keeps to: the rest is for what the runtime
// does not count (the binary, thread stacks, the kernel's page cache charged to the cgroup).
const fraction = 0.9

// limitFiles are where a container sees its own memory limit: cgroup v2, then v1.
var limitFiles = []string{"memory.max", "memory/memory.limit_in_bytes"}

// unlimitedV1 is above any real limit: cgroup v1 reports "none" as the largest page-aligned
// int64 (9223372036854771712).
const unlimitedV1 = math.MaxInt64 / 2

// set sets the runtime's soft limit to fraction of the container's memory limit read under
// cgroupRoot (/sys/fs/cgroup), unless GOMEMLIMIT is set, which the runtime has already applied.
// It returns the limit set and the container's (0, 0: none set — no limit found).
func set(cgroupRoot string) (soft, container int64, err error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, 0, nil
	}
	container, err = containerLimit(os.DirFS(cgroupRoot))
	if container == 0 || err != nil {
		return 0, 0, err
	}
	soft = int64(float64(container) * fraction)
	debug.SetMemoryLimit(soft)
	return soft, container, nil
}

// Apply is set on the container's own cgroup filesystem, logged.
func Apply(log *slog.Logger) {
	soft, container, err := set("/sys/fs/cgroup")
	switch {
	case err != nil:
		log.Warn("reading the container's memory limit", "err", err)
	case soft > 0:
		log.Info("Go memory limit set below the container's", "bytes", soft, "container", container)
	}
}

// containerLimit reads the container's memory limit in bytes from a cgroup filesystem; 0 when it
// has none (or is not in a cgroup that says).
func containerLimit(cgroup fs.FS) (int64, error) {
	for _, name := range limitFiles {
		b, err := fs.ReadFile(cgroup, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		text := strings.TrimSpace(string(b))
		if text == "max" {
			return 0, nil
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return 0, &fs.PathError{Op: "parse", Path: name, Err: err}
		}
		if n <= 0 || n >= unlimitedV1 {
			return 0, nil
		}
		return n, nil
	}
	return 0, nil
}
