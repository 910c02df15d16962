package main

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// host is the machine and the code the evidence was produced on.
type host struct {
	Date    string `json:"date"`
	Commit  string `json:"commit"`
	CPU     string `json:"cpu"`
	Cores   int    `json:"cores"`
	Kernel  string `json:"kernel"`
	Go      string `json:"go"`
	Elapsed string `json:"elapsed"`
	Quick   bool   `json:"quick"`
}

func describeHost(root string) host {
	h := host{Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), Cores: runtime.NumCPU(), Go: runtime.Version()}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		h.Commit = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}
