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
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// LoadDir reads every *.yaml and *.yml file in dir (hidden entries, such as a Kubernetes
// ConfigMap's ..data, are skipped) and returns the validated set, or every error found.
func LoadDir(dir string) (*Set, error) { return new(Decoded).LoadDir(dir) }

// Parse validates policy files already in memory; files gives their order.
func Parse(dir string, files []string, contents map[string][]byte) (*Set, error) {
	return new(Decoded).Parse(dir, files, contents)
}

// Decoded remembers each policy file between loads, so that a load costs what changed: at
// 100,000 one-policy files, reading, hashing and decoding every file and resolving every
// tenant took 2 s a load, and a change waited behind the poll's load besides. A file whose
// stamp is unchanged is not read, one whose contents are unchanged not decoded, and a tenant
// is resolved again only when its file or the GatewayDefaults changed; while nothing changed
// the last result stands. What spans files (names, tenants and identities claimed once) is
// checked whole each time. The zero Decoded remembers nothing yet. Safe for one caller at a
// time.
type Decoded struct {
	files map[string]*decodedFile
	// resolvedWith is the GatewayDefaults the files' tenants were resolved against.
	resolvedWith GatewayDefaults
	last         *loadResult
	// now is the clock files' changes are judged recent by (nil: time.Now; tests move it).
	now func() time.Time
}

type decodedFile struct {
	stamp    fileStamp // what stat said before it was read (zero: read it again)
	sum      [sha256.Size]byte
	policies []LimitPolicy
	defaults []GatewayDefaults
	errs     Errors
	resolved *resolvedFile // nil: not resolved against Decoded.resolvedWith
}

// resolvedFile is a file's tenants, in document order, with what resolving them found.
type resolvedFile struct {
	tenants     []*Tenant
	errs, warns Errors
}

// loadResult is what a load returned, and of which files.
type loadResult struct {
	dir   string
	files []string
	set   *Set
	err   error
}

// LoadDir is LoadDir, reading only files whose stamp changed since the last call.
func (d *Decoded) LoadDir(dir string) (*Set, error) {
	files, err := policyFiles(dir)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if d.now != nil {
		now = d.now()
	}
	loaded := make(map[string]*decodedFile, len(files))
	for _, f := range files {
		stamp, err := stampOf(f, now)
		if err != nil {
			return nil, fmt.Errorf("reading policy file: %w", err)
		}
		if known := d.files[f]; known != nil && stamp.unchanged(known.stamp) {
			loaded[f] = known
			continue
		}
		// Read after the stat: a write in between leaves a newer file than its stamp says,
		// which the next load's stamp tells apart.
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading policy file: %w", err)
		}
		loaded[f] = d.decode(f, b)
		loaded[f].stamp = stamp
	}
	return d.validate(dir, files, loaded)
}

// Parse is Parse, decoding only files whose contents changed since the last call.
func (d *Decoded) Parse(dir string, files []string, contents map[string][]byte) (*Set, error) {
	loaded := make(map[string]*decodedFile, len(files))
	for _, f := range files {
		loaded[f] = d.decode(f, contents[f])
	}
	return d.validate(dir, files, loaded)
}

// policyFiles is dir's policy files in path order.
func policyFiles(dir string) ([]string, error) {
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
	return files, nil
}

// decode is file f of contents b: the one remembered when its contents are the same.
func (d *Decoded) decode(f string, b []byte) *decodedFile {
	sum := sha256.Sum256(b)
	if known := d.files[f]; known != nil && known.sum == sum {
		return known
	}
	file := decodeFile(f, b)
	file.sum = sum
	return file
}

// validate checks the files as one set, in order; the set's hash is over their names and
// contents' sums.
func (d *Decoded) validate(dir string, files []string, loaded map[string]*decodedFile) (*Set, error) {
	if d.unchanged(dir, files, loaded) {
		return d.last.set, d.last.err
	}
	d.files = loaded
	c := &collector{}
	var policies []*LimitPolicy
	var defaults []GatewayDefaults
	h := sha256.New()
	for _, f := range files {
		file := loaded[f]
		io.WriteString(h, filepath.Base(f)+"\x00")
		h.Write(file.sum[:])
		for i := range file.policies {
			policies = append(policies, &file.policies[i])
		}
		defaults = append(defaults, file.defaults...)
		c.errs = append(c.errs, file.errs...)
	}
	gd := checkClaims(dir, policies, defaults, c)
	if !reflect.DeepEqual(gd, d.resolvedWith) {
		d.resolvedWith = gd
		for _, file := range loaded {
			file.resolved = nil
		}
	}
	tenants := make([]*Tenant, 0, len(policies))
	for _, f := range files {
		r := loaded[f].resolve(gd)
		tenants = append(tenants, r.tenants...)
		c.errs = append(c.errs, r.errs...)
		c.warns = append(c.warns, r.warns...)
	}
	d.last = &loadResult{dir: dir, files: files}
	if len(c.errs) > 0 {
		d.last.err = c.errs.sorted()
		return nil, d.last.err
	}
	set := newSet(gd, tenants)
	set.Hash = hex.EncodeToString(h.Sum(nil))
	set.Warnings = c.warns.sorted()
	d.last.set = set
	return set, nil
}

// unchanged says the files are those of the last load, each as it was.
func (d *Decoded) unchanged(dir string, files []string, loaded map[string]*decodedFile) bool {
	if d.last == nil || d.last.dir != dir || !slices.Equal(d.last.files, files) {
		return false
	}
	for f, file := range loaded {
		if d.files[f] != file {
			return false
		}
	}
	return true
}

// resolve is the file's tenants resolved against gd, remembered.
func (file *decodedFile) resolve(gd GatewayDefaults) *resolvedFile {
	if file.resolved == nil {
		c := &collector{}
		r := &resolvedFile{tenants: make([]*Tenant, len(file.policies))}
		for i := range file.policies {
			t := resolveTenant(&file.policies[i], gd, c)
			r.tenants[i] = &t
		}
		r.errs, r.warns = c.errs, c.warns
		file.resolved = r
	}
	return file.resolved
}

// decodeFile decodes one file's documents, and the errors found in each on its own.
func decodeFile(f string, b []byte) *decodedFile {
	c := &collector{}
	out := &decodedFile{}
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
			out.policies = append(out.policies, *lp)
		}
		if gd != nil {
			out.defaults = append(out.defaults, *gd)
		}
	}
	out.errs = c.errs
	return out
}

// yamlErrorLine pulls the line number out of a yaml.v3 syntax error ("yaml: line 7: ...").
func yamlErrorLine(err error) int {
	var line int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); scanErr == nil {
		return line
	}
	return 1
}
