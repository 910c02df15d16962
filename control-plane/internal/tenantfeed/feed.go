// Package tenantfeed serves each filter worker the tenants that changed since the policy version
// it runs, and the live replica count, over a long poll on the control plane's ops listener.
//
// Why not ECDS alone: a proxy-wasm filter's configuration is one resource, so through ECDS a
// change of one tenant among 10,000 re-sends and copies every tenant into every worker VM
// (5.5 MB at 10,000 tenants, 55 MB at 100,000), and so does a change of the replica count.
// Through the feed a change costs what it changes: the ECDS configuration stays the base a
// worker starts from, and a policy change that leaves everything but tenants alone reaches
// the workers as the tenants it touched.
//
// Versions are told apart by their content hash ("12-3f9a…" holds 3f9a…), the same on every
// control plane replica, so a worker may poll any replica whatever its counter.
package tenantfeed

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
)

// Path is where the filter polls (GET, see Handler).
const Path = "/v1/tenants"

// versionsKept bounds how many past versions the feed can answer a delta from; a worker
// further behind is sent every tenant.
const versionsKept = 1024

// tombstonesKept bounds the removed tenants remembered; past it they are forgotten, and a
// worker on a version from before is sent every tenant.
const tombstonesKept = 4096

// Feed is the published tenants of each protocol with the sequence number of their last
// change. It is safe for concurrent use.
type Feed struct {
	mu       sync.Mutex
	seq      uint64
	version  string
	replicas int
	// at is the sequence number at which each content hash was published; order is their
	// publication order, to forget the oldest.
	at    map[string]uint64
	order []string
	// floor: a delta from a version published before it cannot be told (tombstones dropped).
	floor      uint64
	tenants    map[compile.Protocol]map[string]*entry
	tombstones int
	// changed is closed, and replaced, at every change a poll may wait for.
	changed chan struct{}
}

type entry struct {
	json json.RawMessage
	seq  uint64
	gone bool
}

// New is an empty feed: nothing is published yet.
func New() *Feed {
	return &Feed{at: map[string]uint64{}, tenants: map[compile.Protocol]map[string]*entry{}, changed: make(chan struct{})}
}

// ContentOf is the content hash of a published version ("12-3f9a…" holds 3f9a…).
func ContentOf(version string) string {
	_, h, _ := strings.Cut(version, "-")
	return h
}

// Publish makes encoded the current tenants, as version: by protocol, then name, each
// compiled for the filter (compile.Tenant) as JSON, which the feed keeps and must not change.
func (f *Feed) Publish(version string, encoded map[compile.Protocol]map[string]json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	for p, now := range encoded {
		known := f.tenants[p]
		if known == nil {
			known = map[string]*entry{}
			f.tenants[p] = known
		}
		for name, b := range now {
			if e, ok := known[name]; ok && !e.gone && bytes.Equal(e.json, b) {
				continue
			}
			if e, ok := known[name]; ok && e.gone {
				f.tombstones--
			}
			known[name] = &entry{json: b, seq: f.seq}
		}
	}
	for p, known := range f.tenants {
		for name, e := range known {
			if _, kept := encoded[p][name]; !kept && !e.gone {
				known[name] = &entry{seq: f.seq, gone: true}
				f.tombstones++
			}
		}
	}
	if f.tombstones > tombstonesKept {
		f.forgetTombstones()
	}
	f.version = version
	content := ContentOf(version)
	if _, seen := f.at[content]; !seen {
		f.order = append(f.order, content)
	}
	f.at[content] = f.seq
	if len(f.order) > versionsKept {
		delete(f.at, f.order[0])
		f.order = f.order[1:]
	}
	f.notify()
}

func (f *Feed) forgetTombstones() {
	for _, known := range f.tenants {
		for name, e := range known {
			if e.gone {
				delete(known, name)
			}
		}
	}
	f.tombstones = 0
	f.floor = f.seq
}

// SetReplicas makes n the live replica count the workers are told.
func (f *Feed) SetReplicas(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n != f.replicas {
		f.replicas = n
		f.notify()
	}
}

func (f *Feed) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Delta is what a worker on one version needs to be on the current one.
type Delta struct {
	Version string `json:"version"`
	// Replicas is the live replica count; 0 while this control plane does not know it (the
	// worker keeps its own).
	Replicas int `json:"replicas"`
	// Full: Tenants are every tenant, and any other the worker has is gone.
	Full    bool              `json:"full,omitempty"`
	Tenants []json.RawMessage `json:"tenants"`
	Removed []string          `json:"removed,omitempty"`
}

// unknownGrace is how long a poll naming a version this replica has not published waits for
// it before being sent every tenant: another replica may have published it a moment earlier.
const unknownGrace = 2 * time.Second

// replicasGrace is how long a poll whose worker runs the current version with another replica
// count waits before being told this replica's count. Control plane replicas count the gateway
// apart (each its own DNS lookup): while they disagree, a worker told one count by each in turn
// would otherwise poll again at once, over and over.
const replicasGrace = time.Second

// Wait answers a worker of protocol p on version applied, told replicas: the delta to the
// current version once there is one (nil, false if ctx ends first).
func (f *Feed) Wait(ctx context.Context, p compile.Protocol, applied string, replicas int) (*Delta, bool) {
	asked := time.Now()
	for {
		f.mu.Lock()
		d, unknown := f.delta(p, applied, replicas)
		changed := f.changed
		f.mu.Unlock()
		var hold time.Duration
		switch {
		case d == nil:
		case unknown:
			hold = unknownGrace
		case ContentOf(applied) == ContentOf(d.Version):
			hold = replicasGrace
		}
		if d != nil && time.Since(asked) >= hold {
			return d, true
		}
		var grace <-chan time.Time
		if d != nil {
			grace = time.After(hold - time.Since(asked))
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-changed:
		case <-grace:
		}
	}
}

// delta is nil when the worker is current; unknown says its version is not one this feed can
// tell a delta from (the delta is then every tenant).
func (f *Feed) delta(p compile.Protocol, applied string, replicas int) (d *Delta, unknown bool) {
	// A count of 0 is not known yet (no gateway connected here, its pods not yet counted): a
	// worker's own stands.
	if f.version == "" || (ContentOf(applied) == ContentOf(f.version) && (replicas == f.replicas || f.replicas == 0)) {
		return nil, false
	}
	from, known := f.at[ContentOf(applied)]
	if ContentOf(applied) == ContentOf(f.version) {
		from, known = f.seq, true
	}
	full := !known || from < f.floor
	d = &Delta{Version: f.version, Replicas: f.replicas, Full: full, Tenants: []json.RawMessage{}}
	names := make([]string, 0)
	for name, e := range f.tenants[p] {
		if (full && !e.gone) || (!full && e.seq > from) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if e := f.tenants[p][name]; e.gone {
			d.Removed = append(d.Removed, name)
		} else {
			d.Tenants = append(d.Tenants, e.json)
		}
	}
	return d, !known
}
