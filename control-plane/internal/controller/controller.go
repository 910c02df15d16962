// Package controller owns the active policy set: it loads the policy directory, publishes a
// valid set to Envoy and keeps the last good one when a change is invalid.
package controller

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// Publisher delivers a valid policy set to the data plane as the given version.
type Publisher interface {
	Publish(set *policy.Set, version string) error
}

// Active describes the policy set in force.
type Active struct {
	Version  string    `json:"version"`
	Hash     string    `json:"hash"`
	LoadedAt time.Time `json:"loadedAt"`
	Tenants  []string  `json:"tenants"`
	// Warnings are the set's findings that did not stop it loading (FILE:LINE:COL: field: reason).
	Warnings []string `json:"warnings,omitempty"`
}

// LoadError is the last refused change: the first error and all of them.
type LoadError struct {
	At     time.Time `json:"at"`
	File   string    `json:"file,omitempty"`
	Line   int       `json:"line,omitempty"`
	Errors []string  `json:"errors"`
}

// Controller reloads policies on demand; it is safe for concurrent use.
type Controller struct {
	dir       string // the policy directory, or what else the sets come from
	publisher Publisher
	log       *slog.Logger

	// witnessedMu guards what gateways told (Witness, from xDS and feed handlers, which must
	// not wait for a publication in progress on mu): witnessed is the highest generation a
	// gateway said it runs, of one of the content hashes this replica published (published,
	// oldest first, at most publishedKept), so a request naming a made-up version cannot push
	// the numbering up.
	witnessedMu sync.Mutex
	witnessed   int
	published   []string

	mu sync.Mutex
	// generation is the active version's. A version is numbered one past it and past any
	// witnessed, so replicas that publish the same change number it alike, and a restarted one
	// does not count from 1 below what the gateways hold.
	generation int
	active     *Active
	lastError  *LoadError
	reloads    map[string]int // result -> count, for metrics
	// decoded keeps each policy file's decoded documents between reloads (Reload is called by
	// one watcher at a time).
	decoded policy.Decoded
}

func New(dir string, p Publisher, log *slog.Logger) *Controller {
	return &Controller{dir: dir, publisher: p, log: log, reloads: map[string]int{}}
}

// Reload reads the directory; a valid set with new content becomes the next version, an
// invalid one is refused whole and recorded, leaving the active version in force.
func (c *Controller) Reload() error {
	return c.Apply(c.decoded.LoadDir(c.dir))
}

// Apply makes a valid set with new content the next version, or records err (the set's
// errors), leaving the active version in force.
func (c *Controller) Apply(set *policy.Set, err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		le := &LoadError{At: time.Now(), Errors: []string{err.Error()}}
		var perrs policy.Errors
		if errors.As(err, &perrs) && len(perrs) > 0 {
			le.Errors = le.Errors[:0]
			for _, e := range perrs {
				le.Errors = append(le.Errors, e.Error())
			}
			le.File, le.Line = perrs[0].Pos.File, perrs[0].Pos.Line
		}
		if c.lastError != nil && equalStrings(c.lastError.Errors, le.Errors) {
			return err // the same refused change, seen again by the poll: reported once
		}
		c.reloads["error"]++
		c.lastError = le
		c.log.Error("policy change refused; the last good version stays in force",
			"dir", c.dir, "active", c.activeVersion(), "errors", len(le.Errors), "first", le.Errors[0])
		return err
	}
	if c.active != nil && c.active.Hash == set.Hash {
		c.lastError = nil
		return nil
	}
	c.witnessedMu.Lock()
	generation := max(c.generation, c.witnessed) + 1
	c.witnessedMu.Unlock()
	version := fmt.Sprintf("%d-%s", generation, set.Hash[:12])
	if err := c.publisher.Publish(set, version); err != nil {
		c.reloads["error"]++
		c.lastError = &LoadError{At: time.Now(), Errors: []string{"publishing: " + err.Error()}}
		c.log.Error("publishing policy failed", "version", version, "err", err)
		return err
	}
	c.generation = generation
	c.remember(set.Hash[:12])
	tenants := make([]string, 0, len(set.Tenants))
	for _, t := range set.Tenants {
		tenants = append(tenants, t.Policy.Tenant)
	}
	c.active = &Active{Version: version, Hash: set.Hash, LoadedAt: time.Now(), Tenants: tenants}
	for _, w := range set.Warnings {
		c.active.Warnings = append(c.active.Warnings, w.Error())
		c.log.Warn("policy warning", "version", version, "warning", w.Error())
	}
	c.lastError = nil
	c.reloads["ok"]++
	c.log.Info("policy version published", "version", version, "tenants", tenants)
	return nil
}

// maxGeneration bounds a generation witnessed: the filter's gauge is a float64, exact to 2^53.
const maxGeneration = 1 << 52

// publishedKept bounds the content hashes remembered for Witness.
const publishedKept = 1024

func (c *Controller) remember(hash string) {
	c.witnessedMu.Lock()
	defer c.witnessedMu.Unlock()
	c.published = append(c.published, hash)
	if len(c.published) > publishedKept {
		c.published = c.published[1:]
	}
}

// Witness records a policy version ("<generation>-<hash>") a gateway says it runs, sent by
// this replica or another, of a content this replica has published: the next version is
// numbered past it.
func (c *Controller) Witness(version string) {
	g, hash, found := strings.Cut(version, "-")
	n, err := strconv.Atoi(g)
	if !found || err != nil || n > maxGeneration {
		return
	}
	c.witnessedMu.Lock()
	defer c.witnessedMu.Unlock()
	if slices.Contains(c.published, hash) {
		c.witnessed = max(c.witnessed, n)
	}
}

// ActiveVersion is the version in force ("" before the first).
func (c *Controller) ActiveVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.activeVersion()
}

func (c *Controller) activeVersion() string {
	if c.active == nil {
		return ""
	}
	return c.active.Version
}

// State is a snapshot of the controller for /status and /metrics.
type State struct {
	Dir        string         `json:"policyDir"`
	Generation int            `json:"generation"`
	Active     *Active        `json:"active"`
	LastError  *LoadError     `json:"lastError"`
	Reloads    map[string]int `json:"reloads"`
}

func (c *Controller) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := make(map[string]int, len(c.reloads))
	for k, v := range c.reloads {
		r[k] = v
	}
	s := State{Dir: c.dir, Generation: c.generation, LastError: c.lastError, Reloads: r}
	if c.active != nil {
		a := *c.active
		s.Active = &a
	}
	return s
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
