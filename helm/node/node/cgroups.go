package node

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

const cgroupRoot = "/sys/fs/cgroup"

// cgroupDirs is every cgroup directory on the machine (each hierarchy of cgroup v1 and the v2
// one): runc makes one per container under cgroupfs, and a container killed with its shim
// leaves its directories behind.
func cgroupDirs() map[string]bool {
	dirs := map[string]bool{}
	_ = filepath.WalkDir(cgroupRoot, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.IsDir() {
			dirs[path] = true
		}
		return nil
	})
	return dirs
}

// newCgroups is the cgroup directories that are not in before.
func newCgroups(before map[string]bool) []string {
	var out []string
	for dir := range cgroupDirs() {
		if !before[dir] {
			out = append(out, dir)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

// removeNewCgroups removes the cgroups made since before, deepest first; an error names those
// that could not be removed (a process still in one).
func removeNewCgroups(before map[string]bool) error {
	var left []string
	for _, dir := range newCgroups(before) {
		if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
			left = append(left, dir)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("cgroups left behind: %s", strings.Join(left, ", "))
	}
	return nil
}

// mountCgroups mounts again, in the node's mount namespace, the cgroup hierarchies the launcher
// (the parent process, in the machine's mount namespace) sees: `ip netns exec` mounts a fresh
// sysfs for the new network namespace, which hides /sys/fs/cgroup, and the kubelet and runc
// need it.
func mountCgroups() error {
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", os.Getppid()))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(info), "\n") {
		// id parent dev root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || !strings.HasPrefix(f[4], cgroupRoot) {
			continue
		}
		target, fstype := f[4], g[0]
		var opts []string
		for _, o := range strings.Split(g[2], ",") {
			if o != "rw" && o != "ro" {
				opts = append(opts, o)
			}
		}
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(g[1], target, fstype, 0, strings.Join(opts, ",")); err != nil {
			return fmt.Errorf("mount %s %s (%s): %w", fstype, target, strings.Join(opts, ","), err)
		}
	}
	return nil
}
