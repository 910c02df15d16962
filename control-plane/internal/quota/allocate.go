// Package quota is the second level of the lease hierarchy (docs/architecture.md): it divides
// a global tenant's rate among the gateway replicas that carry its traffic. Each replica
// reports, about once a second, what it admitted and refused under each global limit, how many
// of the tenant's connections it holds and whether it was held back; it gets back its share of
// the limit, which its workers then lease from in blocks. The reports live in Redis, so any
// number of quota services answer alike and a restart forgets nothing.
package quota

import "sort"

// Report is one replica's last second under one global limit.
type Report struct {
	Replica string `json:"replica"`
	// Admitted and Refused are messages in the last report period, per second.
	Admitted float64 `json:"admitted"`
	Refused  float64 `json:"refused"`
	// Connections is how many of the tenant's connections the replica holds.
	Connections int `json:"connections"`
	// Saturated says the replica refused or held messages: it wanted more than its share.
	Saturated bool `json:"saturated"`
	// At is when the report was made (Unix ms).
	At int64 `json:"at"`
}

// headroom is what a replica that is not held back gets above what it used, so its traffic can
// grow before the next report.
const headroom = 1.25

// minimumShare is the least a live replica is given, so a replica whose first connection just
// arrived can admit before its first report.
const minimumShare = 0.02

// Allocate divides a limit among the replicas that reported: shares that sum to 1. A replica
// that was not held back gets what it used with headroom; what is left goes to those that were,
// in proportion to their connections — so when every replica is saturated, a tenant's
// connections each get about the same rate wherever they landed. Slack nobody wants is shared
// equally.
func Allocate(limit float64, reports []Report) map[string]float64 {
	shares := map[string]float64{}
	if len(reports) == 0 || limit <= 0 {
		return shares
	}
	sorted := append([]Report(nil), reports...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Replica < sorted[j].Replica })
	floor := minimumShare * limit
	wants := map[string]float64{}
	var unsaturated float64
	var connections int
	for _, r := range sorted {
		if r.Saturated {
			connections += max(r.Connections, 1)
			continue
		}
		w := max(r.Admitted*headroom, floor)
		wants[r.Replica] = w
		unsaturated += w
	}
	// Replicas not held back together want more than the limit: scale them down to it (a
	// replica that was not refused anything cannot be told apart from one about to be).
	scale := 1.0
	if unsaturated > limit {
		scale = limit / unsaturated
	}
	left := limit - unsaturated*scale
	for _, r := range sorted {
		if !r.Saturated {
			shares[r.Replica] = wants[r.Replica] * scale
		}
	}
	if connections > 0 {
		for _, r := range sorted {
			if r.Saturated {
				shares[r.Replica] = left * float64(max(r.Connections, 1)) / float64(connections)
			}
		}
	} else {
		for _, r := range sorted {
			shares[r.Replica] += left / float64(len(sorted))
		}
	}
	for k, v := range shares {
		shares[k] = v / limit
	}
	return shares
}
