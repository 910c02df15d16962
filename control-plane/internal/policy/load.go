package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// LoadDir reads every *.yaml and *.yml file in dir (hidden entries, such as a Kubernetes
// ConfigMap's ..data, are skipped) and returns the validated set, or every error found.
func LoadDir(dir string) (*Set, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading policy directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		files = append(files, filepath.Join(dir, name))
	}
	sort.Strings(files)
	contents := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading policy file: %w", err)
		}
		contents[f] = b
	}
	return Parse(dir, files, contents)
}

// Parse validates policy files already in memory; files gives their order.
func Parse(dir string, files []string, contents map[string][]byte) (*Set, error) {
	c := &collector{}
	var policies []LimitPolicy
	var defaults []GatewayDefaults
	h := sha256.New()
	for _, f := range files {
		b := contents[f]
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(f), len(b))
		h.Write(b)
		d := &decoder{file: f, c: c}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var doc yaml.Node
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				c.add(Pos{File: f, Line: yamlErrorLine(err), Column: 1}, "(yaml)", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
				break
			}
			if len(doc.Content) == 0 || (len(doc.Content) == 1 && doc.Content[0].Tag == "!!null") {
				continue // an empty document, e.g. a trailing ---
			}
			lp, gd := d.document(&doc)
			if lp != nil {
				policies = append(policies, *lp)
			}
			if gd != nil {
				defaults = append(defaults, *gd)
			}
		}
	}
	set := validateSet(dir, policies, defaults, c)
	if len(c.errs) > 0 {
		return nil, c.errs.sorted()
	}
	set.Hash = hex.EncodeToString(h.Sum(nil))
	set.Warnings = c.warns.sorted()
	return set, nil
}

// yamlErrorLine pulls the line number out of a yaml.v3 syntax error ("yaml: line 7: ...").
func yamlErrorLine(err error) int {
	var line int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); scanErr == nil {
		return line
	}
	return 1
}
