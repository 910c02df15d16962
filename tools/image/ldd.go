package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// libraries lists what the dynamic loader maps for the ELF objects: every shared library ldd
// resolves (it follows them transitively) and the loader itself, as absolute paths on this
// machine. A library ldd cannot find is an error: the image would not run. ldd, rather than
// reading DT_NEEDED, so that the paths are where this machine's loader finds them (ld.so.cache,
// RUNPATH, $ORIGIN), the paths the image then carries them at.
func libraries(env []string, elfs ...string) ([]string, error) {
	seen := map[string]bool{}
	for _, e := range elfs {
		cmd := exec.Command("ldd", e)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			// ldd exits 1 for an object with no dynamic section (a static program): it needs nothing.
			var exit *exec.ExitError
			if errors.As(err, &exit) && strings.Contains(string(exit.Stderr), "not a dynamic executable") {
				continue
			}
			return nil, fmt.Errorf("ldd %s: %w\n%s", e, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			p, err := lddPath(line)
			if err != nil {
				return nil, fmt.Errorf("ldd %s: %w", e, err)
			}
			if p != "" {
				seen[p] = true
			}
		}
	}
	libs := make([]string, 0, len(seen))
	for p := range seen {
		libs = append(libs, p)
	}
	sort.Strings(libs)
	return libs, nil
}

// lddPath is the file one line of ldd's output names: "libc.so.6 => /lib/.../libc.so.6 (0x…)"
// or "/lib64/ld-linux-x86-64.so.2 (0x…)" (the loader); "" for the vDSO, which the kernel maps.
func lddPath(line string) (string, error) {
	line = strings.TrimSpace(line)
	if line == "" || line == "statically linked" {
		return "", nil
	}
	if name, target, ok := strings.Cut(line, "=>"); ok {
		target = strings.TrimSpace(target)
		if strings.HasPrefix(target, "not found") {
			return "", fmt.Errorf("%s is not found", strings.TrimSpace(name))
		}
		p, _, _ := strings.Cut(target, " (")
		if p == "" {
			// "linux-vdso.so.1 =>  (0x…)" on older glibc.
			return "", nil
		}
		return filepath.Clean(p), nil
	}
	p, _, _ := strings.Cut(line, " (")
	if !filepath.IsAbs(p) {
		return "", nil // linux-vdso.so.1
	}
	return filepath.Clean(p), nil
}
