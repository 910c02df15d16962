package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quickStartMatches: docs/operations.md's "Quick start on Kubernetes" (its ```sh k8s-node block)
// lists the commands the setup ran, in the same order, as a user types them (after `make
// run-k8s` and the exports it prints).
func quickStartMatches(t *testing.T, ran []string) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```sh k8s-node\n")
	if block, _, ok2 := strings.Cut(block, "```"); ok && ok2 {
		var listed []string
		for _, line := range strings.Split(block, "\n") {
			if c, _, _ := strings.Cut(line, " #"); strings.TrimSpace(c) != "" {
				line = strings.TrimSpace(c)
			} else {
				continue
			}
			if strings.HasPrefix(line, "make run-k8s") || strings.HasPrefix(line, "export ") {
				continue
			}
			listed = append(listed, line)
		}
		if strings.Join(listed, "\n") != strings.Join(ran, "\n") {
			t.Errorf("docs/operations.md's quick start lists:\n  %s\nthe setup ran:\n  %s", strings.Join(listed, "\n  "), strings.Join(ran, "\n  "))
		}
		return
	}
	t.Fatal("docs/operations.md has no ```sh k8s-node block (the quick start on Kubernetes)")
}
