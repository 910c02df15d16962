// Package discovery keeps the Kafka brokers the gateway has learned of. The filter cannot open
// a listener or choose an upstream, and the control plane has no Kafka client (nor the
// credentials: brokers admit the gateway's certificate, and SASL is the clients' own). So every
// filter worker reports each broker it has seen named in a response on a discovered cluster's
// listeners (node id, address as the broker advertises itself) with its usage report, all of
// them every time; every control plane replica receives them (reports are relayed to peers) and
// gives each broker in range an upstream, over xDS, to every Envoy alike. A broker outside its
// cluster's range, or with an address no Envoy could dial, is never fronted: the filter keeps
// withholding it, and /status, a metric and the log name it.
package discovery

import (
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Range is one discovered cluster's listener kind: the filter chain its listeners share, and
// the node ids it has ports for.
type Range struct {
	Chain       string
	First, Last int32
}

// Seen is a broker a filter worker reported (wasm-filter/core/src/report SeenBroker).
type Seen struct {
	Chain  string `json:"chain"`
	Node   int32  `json:"node"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
	SeenMs int64  `json:"seenMs"`
}

// States of a broker.
const (
	Fronted        = "fronted"
	OutOfRange     = "out-of-range"
	InvalidAddress = "invalid-address"
)

// Broker is what the registry knows of one node id on one cluster's listeners.
type Broker struct {
	Chain   string `json:"chain"`
	Node    int32  `json:"node"`
	Address string `json:"address"`
	State   string `json:"state"`
	// Reason says why a broker is not fronted.
	Reason    string    `json:"reason,omitempty"`
	FirstSeen time.Time `json:"firstSeen"`
	// seenMs is the newest sighting behind Address: an older one (a worker that has not seen
	// the broker move) does not move it back.
	seenMs int64
}

// maxWithheld bounds the brokers kept that are not fronted: a hostile response could name any
// number; past it they are counted, not kept.
const maxWithheld = 1024

type key struct {
	chain string
	node  int32
}

// Registry is the brokers learned so far. A control plane that restarts learns them again
// from the first reports (each names every broker its worker has seen).
type Registry struct {
	mu       sync.Mutex
	ranges   map[string]Range
	brokers  map[key]*Broker
	withheld int
	// Dropped counts brokers reported but not kept (past maxWithheld).
	dropped  uint64
	onChange func()
	log      *slog.Logger
}

// New is a registry for these clusters' listener kinds.
func New(ranges []Range, log *slog.Logger) *Registry {
	r := &Registry{ranges: map[string]Range{}, brokers: map[key]*Broker{}, log: log}
	for _, rg := range ranges {
		r.ranges[rg.Chain] = rg
	}
	return r
}

// OnChange is called (outside the registry's lock) whenever the fronted brokers change.
func (r *Registry) OnChange(f func()) {
	r.mu.Lock()
	r.onChange = f
	r.mu.Unlock()
}

// Observe takes the brokers one report names.
func (r *Registry) Observe(seen []Seen, now time.Time) {
	if len(seen) == 0 {
		return
	}
	changed := false
	r.mu.Lock()
	for _, s := range seen {
		changed = r.observe(s, now) || changed
	}
	f := r.onChange
	r.mu.Unlock()
	if changed && f != nil {
		f()
	}
}

// observe takes one sighting; true if the fronted brokers changed.
func (r *Registry) observe(s Seen, now time.Time) bool {
	rg, ok := r.ranges[s.Chain]
	if !ok {
		return false // a listener kind this control plane does not serve (yet, or any more)
	}
	k := key{s.Chain, s.Node}
	address := net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port)))
	state, reason := Fronted, ""
	if s.Node < rg.First || s.Node > rg.Last {
		state, reason = OutOfRange, fmt.Sprintf("node id %d is outside %d-%d, the ids the gateway has ports for", s.Node, rg.First, rg.Last)
	} else if why := invalidAddress(s.Host, s.Port); why != "" {
		state, reason = InvalidAddress, why
	}
	b := r.brokers[k]
	if b == nil {
		if state != Fronted && r.withheld >= maxWithheld {
			r.dropped++
			return false
		}
		b = &Broker{Chain: s.Chain, Node: s.Node, FirstSeen: now, seenMs: s.SeenMs}
		r.brokers[k] = b
	} else if s.SeenMs < b.seenMs || (b.Address == address && b.State == state) {
		b.seenMs = max(b.seenMs, s.SeenMs)
		return false
	}
	was := b.State
	if was != Fronted && was != "" {
		r.withheld--
	}
	if state != Fronted {
		r.withheld++
	}
	moved := b.Address != "" && b.Address != address
	b.Address, b.State, b.Reason, b.seenMs = address, state, reason, s.SeenMs
	switch {
	case state != Fronted:
		r.log.Warn("kafka broker withheld: clients are never told its address", "chain", s.Chain, "node", s.Node, "address", address, "reason", reason)
	case moved:
		r.log.Info("kafka broker moved", "chain", s.Chain, "node", s.Node, "address", address)
	default:
		r.log.Info("kafka broker discovered", "chain", s.Chain, "node", s.Node, "address", address)
	}
	return was == Fronted || state == Fronted
}

// invalidAddress says why no Envoy could dial host:port ("" if one could try).
func invalidAddress(host string, port int32) string {
	if port < 1 || port > 65535 {
		return fmt.Sprintf("port %d is not a TCP port", port)
	}
	if net.ParseIP(host) != nil {
		return ""
	}
	if host == "" || len(host) > 253 {
		return fmt.Sprintf("host of %d bytes is not a DNS name", len(host))
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return fmt.Sprintf("host %q is not a DNS name", host)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("host %q is not a DNS name", host)
			}
		}
	}
	return ""
}

// Fronted is every fronted broker's address by filter chain and node id.
func (r *Registry) Fronted() map[string]map[int32]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]map[int32]string{}
	for k, b := range r.brokers {
		if b.State != Fronted {
			continue
		}
		if out[k.chain] == nil {
			out[k.chain] = map[int32]string{}
		}
		out[k.chain][k.node] = b.Address
	}
	return out
}

// Brokers is every broker known, by chain and node id.
func (r *Registry) Brokers() []Broker {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Broker, 0, len(r.brokers))
	for _, b := range r.brokers {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Chain != out[j].Chain {
			return out[i].Chain < out[j].Chain
		}
		return out[i].Node < out[j].Node
	})
	return out
}

// Dropped is how many reported brokers were not kept (more withheld ones than maxWithheld).
func (r *Registry) Dropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}
