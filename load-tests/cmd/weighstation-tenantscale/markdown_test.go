package main

import (
	"strings"
	"testing"
	"time"
)

func testRung(source string, tenants int) rung {
	return rung{source: source, tenants: tenants, start: time.Second, inForce: []time.Duration{300 * time.Millisecond},
		acked: []time.Duration{400 * time.Millisecond}, envoyFirst: 100 << 10, envoyMost: 100 << 10, cpFirst: 50 << 10, cpMost: 60 << 10,
		created: 30 * time.Second, conditionsDone: 200 * time.Second, statusDone: 400 * time.Second}
}

// Each source's run keeps the other's rows; a row of the table before the source column is a
// files row.
func TestMarkdownKeepsTheOtherSource(t *testing.T) {
	before := `# Tenants at scale (make bench-tenants)

| tenants | start | change in force (median / max) | rewrite back acknowledged (median) | Envoy RSS first → most | control plane RSS first → most | goals |
|---:|---:|---:|---:|---:|---:|:--|
| 10 | 778ms | 109ms / 111ms | 127ms | 126 → 126 MiB (+0.4%) | 61 → 68 MiB | met |
`
	kube := markdown([]rung{testRung("kubernetes", 10000)}, before)
	for _, want := range []string{
		"| files | 10 | 778ms | 109ms / 111ms |",
		"| kubernetes | 10000 | 1s | 300ms / 300ms | 400ms |",
		"| 10000 | 30s | 3m20s | 6m40s |",
	} {
		if !strings.Contains(kube, want) {
			t.Errorf("after the kubernetes run, no %q in\n%s", want, kube)
		}
	}
	files := markdown([]rung{testRung("files", 1000)}, kube)
	for _, want := range []string{"| files | 1000 |", "| kubernetes | 10000 |", "| 10000 | 30s | 3m20s | 6m40s |"} {
		if !strings.Contains(files, want) {
			t.Errorf("after the files run, no %q in\n%s", want, files)
		}
	}
	if strings.Contains(files, "| files | 10 |") {
		t.Errorf("the files run kept the old files row:\n%s", files)
	}
	if n := strings.Count(files, kubeHeading); n != 1 {
		t.Errorf("%d kubernetes sections:\n%s", n, files)
	}
}
