package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// `weighstation <command> --help` prints the command's flags and exits 0; a wrong flag exits 2.
func TestEveryCommandsHelpExitsZero(t *testing.T) {
	commands := map[string]func(args []string, stdout, stderr io.Writer) int{
		"serve":     func(a []string, _, _ io.Writer) int { return serve(a) },
		"quota":     func(a []string, _, _ io.Writer) int { return quotaCmd(a) },
		"validate":  validate,
		"bootstrap": bootstrapCmd,
		"decisions": decisionsCmd,
		"top":       topCmd,
		"usage":     func(a []string, o, e io.Writer) int { return usageCmd(append([]string{"export"}, a...), o, e) },
		"impact":    impactCmd,
		"drain":     drainCmd,
		"check":     checkCmd,
	}
	for name, run := range commands {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run([]string{"--help"}, &out, &errOut); code != 0 {
				t.Errorf("%s --help exited %d\n%s", name, code, errOut.String())
			}
			if code := run([]string{"--no-such-flag"}, &out, &errOut); code != 2 {
				t.Errorf("%s --no-such-flag exited %d, want 2", name, code)
			}
		})
	}
	var errOut bytes.Buffer
	if code := usageCmd([]string{"--help"}, io.Discard, &errOut); code != 0 || !strings.Contains(errOut.String(), "usage export") {
		t.Errorf("usage --help exited %d: %s", code, errOut.String())
	}
}
