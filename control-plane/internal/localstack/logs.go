package localstack

import (
	"fmt"
	"os"
	"path/filepath"
)

// logTail is how much of each log a failed test run prints.
const logTail = 4000

// PrintLogTails prints the end of every log in dir to stderr: what a failed test run shows of
// the stack.
func PrintLogTails(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		if len(b) > logTail {
			b = b[len(b)-logTail:]
		}
		fmt.Fprintf(os.Stderr, "\n===== %s (tail) =====\n%s\n", e.Name(), b)
	}
}

// StopAfterTests stops the stack once a test binary's tests ran (their exit code): after a pass
// its work directory goes, after a failure the logs' tails are printed and the directory kept.
func (s *Stack) StopAfterTests(code int, work string) {
	s.Stop()
	if code != 0 {
		PrintLogTails(s.LogDir())
		return
	}
	os.RemoveAll(work)
}
