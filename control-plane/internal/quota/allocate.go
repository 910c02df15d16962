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
	// Admitted is what the replica let through in the last report period, per second, in the
	// limit's unit (messages, or bytes for a limit with only a byte rate).
	Admitted float64 `json:"admitted"`
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

// Allocate divides a limit among the replicas that reported: shares that sum to 1, fair by
// connections (weighted max-min fairness). A replica's fair part is the limit in proportion to
// its connections; one that was not held back and wants less than its part (what it used, with
// headroom) gets what it wants, and what it leaves is divided again among the rest, until every
// remaining replica wants at least its part and gets it. So a tenant's connections each get
// about the same rate wherever they landed, a quiet replica cannot keep a busy one's part by
// having been given it before, and slack nobody wants is shared equally.
func Allocate(limit float64, reports []Report) map[string]float64 {
	shares := map[string]float64{}
	if len(reports) == 0 || limit <= 0 {
		return shares
	}
	sorted := append([]Report(nil), reports...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Replica < sorted[j].Replica })
	floor := minimumShare * limit
	left := limit
	open := sorted
	for len(open) > 0 {
		weight := 0.0
		for _, r := range open {
			weight += float64(max(r.Connections, 1))
		}
		var still []Report
		for _, r := range open {
			part := left * float64(max(r.Connections, 1)) / weight
			if want := max(r.Admitted*headroom, floor); !r.Saturated && want <= part {
				shares[r.Replica] = want
				continue
			}
			still = append(still, r)
		}
		for _, r := range open {
			if _, fixed := shares[r.Replica]; fixed {
				left -= shares[r.Replica]
			}
		}
		if len(still) == len(open) {
			for _, r := range still {
				shares[r.Replica] = left * float64(max(r.Connections, 1)) / weight
			}
			left = 0
			break
		}
		open = still
	}
	for _, r := range sorted {
		shares[r.Replica] = (shares[r.Replica] + left/float64(len(sorted))) / limit
	}
	return shares
}
