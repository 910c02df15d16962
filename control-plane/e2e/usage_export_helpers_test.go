package e2e

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// billed is what `weighstation usage export` says of a tenant (or one of its clients) over
// the rows it sums.
type billed struct{ messages, bytes, refused int }

// usageExport runs `weighstation usage export --since 10m` against the stack's control plane
// and sums its CSV rows by protocol, tenant and client ("" for the tenant's own rows); false if
// the command failed (the control plane not answering yet), and the CSV.
func usageExport(t *testing.T) (map[[3]string]billed, string, bool) {
	t.Helper()
	out, err := exec.Command(filepath.Join(root, ".tools/bin/weighstation"), "usage", "export",
		"--control-plane", "http://"+addr(ports.ControlPlane), "--since", "10m").Output()
	if err != nil {
		return nil, "", false
	}
	sums := map[[3]string]billed{}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if lines[0] != "start,protocol,tenant,messages,bytes,refused,delayed,consumed,client" {
		t.Fatalf("the export's header: %s", lines[0])
	}
	for _, line := range lines[1:] {
		f := strings.Split(line, ",")
		if len(f) != 9 {
			t.Fatalf("an export row of %d fields: %s", len(f), line)
		}
		m, _ := strconv.Atoi(f[3])
		b, _ := strconv.Atoi(f[4])
		r, _ := strconv.Atoi(f[5])
		k := [3]string{f[1], f[2], f[8]}
		s := sums[k]
		sums[k] = billed{s.messages + m, s.bytes + b, s.refused + r}
	}
	return sums, string(out), true
}
