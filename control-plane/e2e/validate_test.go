package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `weighstation validate` is what platform teams run in CI: exit 1 and FILE:LINE:COL errors on a
// bad directory, exit 0 on the shipped examples.
func TestValidateCommand(t *testing.T) {
	bin := filepath.Join(root, ".tools/bin/weighstation")
	out, err := exec.Command(bin, "validate", filepath.Join(root, "policies")).CombinedOutput()
	if err != nil {
		t.Fatalf("the shipped policies do not validate: %v\n%s", err, out)
	}

	dir := t.TempDir()
	bad := `apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: acme
spec:
  tenant: acme
  identify:
    nats: { users: [acme] }
  limits:
    inFlight: 0
    rate: { messagesPerSecond: lots }
`
	if err := os.WriteFile(filepath.Join(dir, "acme.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "validate", dir)
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit = %v, want status 1", err)
	}
	file := filepath.Join(dir, "acme.yaml")
	for _, want := range []string{
		dir + ":1:1: GatewayDefaults: no GatewayDefaults document: one must name spec.defaultTenant",
		file + ":10:15: spec.limits.inFlight: inFlight must be at least 1 (write \"unlimited\" to remove the limit)",
		file + ":11:32: spec.limits.rate.messagesPerSecond: \"lots\" is not a whole number (or \"unlimited\")",
	} {
		if !strings.Contains(stderr.String(), want+"\n") {
			t.Errorf("missing error line %q in:\n%s", want, stderr.String())
		}
	}
}
