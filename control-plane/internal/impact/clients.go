package impact

import (
	"sort"
	"strings"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
)

// ClientDemand is one client's recorded traffic (the export's client rows of its tenant).
type ClientDemand struct {
	Client  string
	Seconds []Second
}

// clientTraces puts recorded clients in the proposed client buckets, as the filter would: the
// first named entry that names a client (exactly, or by a prefix ending in *) is one bucket for
// all it names; a client no entry names has the default's bucket of its own; without a default
// it has none (the tenant's bucket alone limits it). Client limits are not multiplied by the
// replicas: a client is taken to be on one replica, whose bucket it has.
func clientTraces(proposed *compile.Clients, recorded []ClientDemand) []ClientTrace {
	if proposed == nil {
		return nil
	}
	named := map[int][]Second{}
	var out []ClientTrace
	sort.Slice(recorded, func(i, j int) bool { return recorded[i].Client < recorded[j].Client })
	for _, c := range recorded {
		if i := namedFor(proposed.Named, c.Client); i >= 0 {
			named[i] = mergeSeconds(named[i], c.Seconds)
		} else if proposed.Default != nil {
			out = append(out, ClientTrace{Limits: *proposed.Default, Seconds: c.Seconds})
		}
	}
	for i, n := range proposed.Named {
		if s, ok := named[i]; ok {
			out = append(out, ClientTrace{Limits: n.Limits, Seconds: s})
		}
	}
	return out
}

// namedFor is the index of the first entry naming client, -1 if none does.
func namedFor(entries []compile.NamedClient, client string) int {
	for i, n := range entries {
		for _, name := range n.Names {
			if prefix, ok := strings.CutSuffix(name, "*"); ok && strings.HasPrefix(client, prefix) || name == client {
				return i
			}
		}
	}
	return -1
}
