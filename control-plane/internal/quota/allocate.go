// Package quota is the second level of the lease hierarchy (docs/architecture.md): it divides
// a global tenant's rate among the gateway replicas that carry its traffic. Each replica
// reports, about once a second, what it admitted under each global limit, what its clients
// wanted (its demand) and how many of the tenant's connections it holds; it gets back its share
// of the limit, which its workers then lease from in blocks. The reports and the shares given
// live in Redis, so any number of quota services answer alike and a restart forgets nothing.
package quota

import "sort"

// Report is one replica's last second under one global limit.
type Report struct {
	Replica string
	// Admitted is what the replica let through in the last report period, per second, in the
	// limit's unit (messages, or bytes for a limit with only a byte rate).
	Admitted float64
	// Demand is what its clients wanted, per second, in the same unit (see the filter's
	// weighstation_core::quota::Demand: admitted and refused for a tenant that rejects; for one
	// that delays, what the time its connections were held hid).
	Demand float64
	// Connections is how many of the tenant's connections the replica holds.
	Connections int
	// Saturated says the replica refused or held messages.
	Saturated bool
	// At is when the report was made (Unix ms).
	At int64
}

// Allocate divides a limit among the replicas that reported by their demand, max-min fair:
// when the demands fit in the limit each replica gets its demand, and what nobody wants is
// spread by connections, so traffic can grow anywhere before the next report. Of `live`
// replicas (the gateway's, as the filter knows them), those that have not reported keep a part
// of that spare each, as if they held one connection: what they enforce before their first
// answer (limit ÷ live replicas) is mostly there, and the first replica to report after the
// store was emptied does not take the whole limit from those about to. When they do
// not, the limit is filled level by level: a replica wanting less than its part gets what it
// wants, and what it leaves is divided again among the rest. Connections weigh only among the
// replicas that want more than their part — each then gets the same rate per connection, so a
// tenant's connections are served alike wherever they landed — never against a replica's
// demand: a replica whose connections stall asks for little and is given little.
//
// The shares (fractions of the limit) sum to 1 when every live replica reported, and never
// above it.
func Allocate(limit float64, reports []Report, live int) map[string]float64 {
	shares := map[string]float64{}
	if len(reports) == 0 || limit <= 0 {
		return shares
	}
	weight := func(r Report) float64 { return float64(max(r.Connections, 1)) }
	total, weights := 0.0, 0.0
	for _, r := range reports {
		total += max(r.Demand, 0)
		weights += weight(r)
	}
	if total <= limit {
		spare := limit - total
		weights += float64(max(live-len(reports), 0))
		for _, r := range reports {
			shares[r.Replica] = (max(r.Demand, 0) + spare*weight(r)/weights) / limit
		}
		return shares
	}
	// Water-filling: in order of demand per connection, each replica either fits under the
	// level the rest would share (and gets its demand) or all that remain are capped at it.
	sorted := append([]Report(nil), reports...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := max(sorted[i].Demand, 0)/weight(sorted[i]), max(sorted[j].Demand, 0)/weight(sorted[j])
		if a != b {
			return a < b
		}
		return sorted[i].Replica < sorted[j].Replica
	})
	left, open := limit, weights
	for i, r := range sorted {
		level := left / open
		if d := max(r.Demand, 0); d <= level*weight(r) {
			shares[r.Replica] = d / limit
			left -= d
			open -= weight(r)
			continue
		}
		for _, rest := range sorted[i:] {
			shares[rest.Replica] = level * weight(rest) / limit
		}
		break
	}
	return shares
}
