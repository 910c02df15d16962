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

// A client burst that can empty its tenant's is a warning: validate prints it with its position
// and exits 0, the directory valid.
func TestValidateWarnsOfABurstThatCanEmptyItsTenants(t *testing.T) {
	bin := filepath.Join(root, ".tools/bin/weighstation")
	dir := t.TempDir()
	docs := `apiVersion: weighstation.io/v1alpha1
kind: GatewayDefaults
metadata:
  name: defaults
spec:
  defaultTenant: billing
---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: billing
spec:
  tenant: billing
  limits:
    rate: { messagesPerSecond: 300, burstMessages: 50 }
  clients:
    named:
      - match: { nats: [billing-a] }
        limits: { rate: { messagesPerSecond: 100, burstMessages: 100 } }
`
	file := filepath.Join(dir, "billing.yaml")
	if err := os.WriteFile(file, []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "validate", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("validate: %v (a warning must leave the directory valid)\n%s", err, stderr.String())
	}
	want := file + ":19:66: warning: spec.clients.named[0].limits.rate.burstMessages: 100 is at least the tenant's burst (50): " +
		"spent at once by one client, it empties the tenant's bucket, and the tenant's other messages are refused or held until it refills; " +
		"leave it out (the default here is 12) or set it below 50\n"
	if stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), want)
	}
	if !strings.Contains(stdout.String(), ": valid (1 tenants") || !strings.HasSuffix(stdout.String(), ", 1 warning(s)\n") {
		t.Errorf("stdout %q: want the directory valid, with 1 warning", stdout.String())
	}
}
