package impact

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"
)

// Demand is one tenant's recorded traffic on one protocol: what its clients offered each second
// (accepted + refused: a refused message was offered too).
type Demand struct {
	Protocol, Tenant string
	Seconds          []Second
	// Clients are the tenant's recorded clients (its busiest, as the export keeps them).
	Clients []ClientDemand
}

// ReadUsage reads `weighstation usage export --resolution 1s` CSV (start, protocol, tenant,
// messages, bytes, refused, delayed, and from the read side's release consumed, then client)
// into each tenant's demand, seconds ascending; a row with a client is that client's part of
// its tenant's. A file of per-minute rows is refused: a minute's messages spread evenly would
// hide every burst.
func ReadUsage(r io.Reader) ([]Demand, error) {
	reader := csv.NewReader(r)
	reader.FieldsPerRecord = -1 // the header says how many
	rows, err := reader.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("usage CSV: %w", err)
	}
	if len(rows) == 0 || len(rows[0]) < 7 || len(rows[0]) > 9 || rows[0][0] != "start" {
		return nil, fmt.Errorf("usage CSV: want the header of `weighstation usage export`: start,protocol,tenant,messages,bytes,refused,delayed,consumed,client")
	}
	for i, row := range rows[1:] {
		if len(row) != len(rows[0]) {
			return nil, fmt.Errorf("usage CSV line %d: %d fields, the header has %d", i+2, len(row), len(rows[0]))
		}
	}
	by := map[string]*Demand{}
	clientAt := map[string]int{} // protocol/tenant/client: its index in its tenant's Clients
	stamps := map[int64]bool{}
	for i, row := range rows[1:] {
		line := i + 2
		at, err := time.Parse(time.RFC3339, row[0])
		if err != nil {
			return nil, fmt.Errorf("usage CSV line %d: start %q: %w", line, row[0], err)
		}
		var n [5]uint64 // messages, bytes, refused, delayed, consumed (0 in an older export)
		client := ""
		if len(row) == 9 {
			client, row = row[8], row[:8]
		}
		for j := range row[3:] {
			if n[j], err = strconv.ParseUint(row[3+j], 10, 64); err != nil {
				return nil, fmt.Errorf("usage CSV line %d: %q is not a count: %w", line, row[3+j], err)
			}
		}
		stamps[at.UnixMilli()] = true
		k := row[1] + "/" + row[2]
		d := by[k]
		if d == nil {
			d = &Demand{Protocol: row[1], Tenant: row[2]}
			by[k] = d
		}
		offered := n[0] + n[2]
		bytes := n[1]
		if n[0] > 0 {
			// Refused messages' bytes are not counted: take them at the accepted average.
			bytes += n[1] / n[0] * n[2]
		}
		s := Second{StartMs: at.UnixMilli(), Messages: offered, Bytes: bytes, Consumed: n[4]}
		if client == "" {
			d.Seconds = append(d.Seconds, s)
			continue
		}
		i, ok := clientAt[k+"/"+client]
		if !ok {
			d.Clients = append(d.Clients, ClientDemand{Client: client})
			i = len(d.Clients) - 1
			clientAt[k+"/"+client] = i
		}
		d.Clients[i].Seconds = append(d.Clients[i].Seconds, s)
	}
	if minGap(stamps) >= time.Minute {
		return nil, fmt.Errorf("usage CSV: rows are a minute apart: export with --resolution 1s")
	}
	out := make([]Demand, 0, len(by))
	for _, d := range by {
		sort.Slice(d.Seconds, func(i, j int) bool { return d.Seconds[i].StartMs < d.Seconds[j].StartMs })
		for _, c := range d.Clients {
			sort.Slice(c.Seconds, func(i, j int) bool { return c.Seconds[i].StartMs < c.Seconds[j].StartMs })
		}
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Protocol+"/"+out[i].Tenant < out[j].Protocol+"/"+out[j].Tenant })
	return out, nil
}

// minGap is the shortest time between two distinct timestamps (0 with fewer than two).
func minGap(stamps map[int64]bool) time.Duration {
	all := make([]int64, 0, len(stamps))
	for s := range stamps {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	var gap time.Duration
	for i := 1; i < len(all); i++ {
		if d := time.Duration(all[i]-all[i-1]) * time.Millisecond; gap == 0 || d < gap {
			gap = d
		}
	}
	return gap
}
