package status

import (
	"fmt"
	"io"
	"strings"

	"github.com/weighstation/weighstation/control-plane/internal/usage"
)

// writeClientMetrics renders the opt-in per-client gauges: each tenant's top clients over the
// last minute, per second. Gauges, not counters: a client that leaves a tenant's top N leaves
// the series, which a counter's rate() would read as a reset.
func writeClientMetrics(w io.Writer, rates []usage.ClientRate) {
	var b strings.Builder
	for _, m := range []struct {
		name, help string
		value      func(usage.ClientRate) float64
	}{
		{"weighstation_client_messages_per_second", "Messages of a client the gateway admitted, per second over the last minute (each tenant's top clients by messages admitted and refused; tenants with client limits).",
			func(r usage.ClientRate) float64 { return r.MessagesPerSecond }},
		{"weighstation_client_bytes_per_second", "Bytes of a client's admitted messages, per second over the last minute.",
			func(r usage.ClientRate) float64 { return r.BytesPerSecond }},
		{"weighstation_client_refused_per_second", "Messages of a client the gateway refused, per second over the last minute.",
			func(r usage.ClientRate) float64 { return r.RefusedPerSecond }},
	} {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", m.name, m.help, m.name)
		for _, r := range rates {
			fmt.Fprintf(&b, "%s{protocol=\"%s\",tenant=\"%s\",client=\"%s\"} %g\n", m.name,
				labelValue.Replace(r.Protocol), labelValue.Replace(r.Tenant), labelValue.Replace(r.Client), m.value(r))
		}
	}
	_, _ = io.WriteString(w, b.String())
}

// labelValue escapes a label value as the Prometheus text format wants (a client.id may hold
// any character).
var labelValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
