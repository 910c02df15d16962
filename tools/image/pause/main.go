// Command pause is the pod sandbox's first process in the node images (weighstation.local/
// pause): it holds the pod's namespaces open until the kubelet stops the sandbox with SIGTERM
// or SIGINT, and, as PID 1 of a pod sharing its process namespace, reaps the orphans re-parented
// to it, which would otherwise stay zombies. Built static (CGO_ENABLED=0), so that its image is
// the one file.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if os.Getpid() != 1 {
		// As the upstream pause says: it still waits, but reaps only its own children.
		fmt.Fprintln(os.Stderr, "pause: not PID 1, so orphans are not re-parented to it")
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	// Orphans that exited before Notify took SIGCHLD are reaped too.
	reap()
	for s := range signals {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		// Stopping the sandbox is the normal end: exit 0, as the upstream pause does.
		fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", s)
		os.Exit(0)
	}
}

// reap waits for every child that has exited, without blocking: one SIGCHLD may stand for
// several exits, since pending signals do not queue.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
