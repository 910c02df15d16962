//go:build nodeimages

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The image's /pause, as the first process of a PID namespace (a pod's sandbox), reaps the
// orphans re-parented to it, and exits 0 at SIGTERM.
func TestNodePauseReapsOrphansAndStops(t *testing.T) {
	dir := nodeDir(t)
	img, err := imageIn(filepath.Join(dir, "pause", "oci"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := unpack(img, root); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--fork", "--pid", filepath.Join(root, "pause"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var pause int
	for deadline := time.Now().Add(5 * time.Second); pause == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if kids := children(t, cmd.Process.Pid); len(kids) == 1 {
			pause = kids[0].pid
		}
	}
	if pause == 0 {
		t.Fatal("pause did not start under unshare")
	}
	defer syscall.Kill(pause, syscall.SIGKILL)
	// A process in the namespace leaves two children behind: they are re-parented to PID 1.
	// (They write nowhere: holding CombinedOutput's pipe, they would be waited for.)
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(pause), "-p", "--", "/bin/sh", "-c",
		"sleep 0.5 >/dev/null 2>&1 & sleep 0.5 >/dev/null 2>&1 & exit 0").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v\n%s", err, out)
	}
	if n := len(children(t, pause)); n != 2 {
		t.Fatalf("pause has %d children, want the 2 orphans", n)
	}
	time.Sleep(1500 * time.Millisecond)
	for _, c := range children(t, pause) {
		t.Errorf("pid %d, pause's child, is in state %s after it exited: not reaped", c.pid, c.state)
	}
	if err := syscall.Kill(pause, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pause exited with %v at SIGTERM, want 0", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("pause did not exit at SIGTERM")
	}
}

type proc struct {
	pid   int
	state string
}

// children are the processes whose parent is pid, from /proc/<pid>/stat.
func children(t *testing.T, parent int) []proc {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []proc
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue // it exited
		}
		// pid (comm) state ppid …; comm may hold spaces, so read after its closing parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == parent {
			pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
			out = append(out, proc{pid: pid, state: f[0]})
		}
	}
	return out
}
