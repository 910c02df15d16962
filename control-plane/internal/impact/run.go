package impact

import (
	"context"
	"fmt"

	"github.com/weighstation/weighstation/control-plane/internal/compile"
	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// TenantImpact is what the proposed policies would have done to one tenant's recorded traffic.
type TenantImpact struct {
	Protocol, Tenant string
	// Policy is the proposed LimitPolicy (metadata.name) the traffic falls under; Note says why
	// it is not the tenant's own (its policy was removed: the default tenant takes it).
	Policy, Note string
	Mode         string // enforce or dryRun
	OnLimit      string
	// Limits are the proposed limits as the replay applied them: for a perGateway tenant, each
	// replica's multiplied by Replicas (the trace is the gateway's total).
	Limits   compile.Limits
	Replicas int
	Outcomes []Outcome
	Totals   Outcome
}

// RefusedShare is the part of the offered messages that would be refused.
func (t TenantImpact) RefusedShare() float64 {
	if t.Totals.Offered == 0 {
		return 0
	}
	return float64(t.refused()) / float64(t.Totals.Offered)
}

func (t TenantImpact) refused() uint64 {
	return t.Totals.RefusedSize + t.Totals.RefusedRate + t.Totals.RefusedQueue + t.Totals.RefusedClient
}

// Analyze replays every tenant's demand against set, as a gateway of `replicas` Envoys.
func Analyze(ctx context.Context, sim *Simulator, set *policy.Set, demands []Demand, replicas int) ([]TenantImpact, error) {
	replicas = max(replicas, 1)
	// What each protocol's filter would be configured with: the resolved limits.
	configs := map[string]compile.FilterConfig{}
	for _, p := range []compile.Protocol{compile.NATS, compile.Kafka} {
		configs[string(p)] = compile.Filter(set, "impact", p, replicas)
	}
	policies := map[string]policy.LimitPolicy{}
	for _, t := range set.Tenants {
		policies[t.Policy.Tenant] = t.Policy
	}
	// Traffic of a tenant the proposal no longer names goes to the default tenant.
	merged := map[string]*Demand{}
	notes := map[string]string{}
	var order []string
	for _, d := range demands {
		tenant, note := d.Tenant, ""
		if _, ok := policies[tenant]; !ok {
			tenant, note = set.DefaultTenant, fmt.Sprintf("includes %s's traffic (no policy names it)", d.Tenant)
		}
		k := d.Protocol + "/" + tenant
		m := merged[k]
		if m == nil {
			m = &Demand{Protocol: d.Protocol, Tenant: tenant}
			merged[k] = m
			order = append(order, k)
		}
		m.Seconds = mergeSeconds(m.Seconds, d.Seconds)
		m.Clients = append(m.Clients, d.Clients...)
		if note != "" {
			notes[k] = joinNote(notes[k], note)
		}
	}
	var out []TenantImpact
	for _, k := range order {
		d := merged[k]
		fc, ok := configs[d.Protocol]
		if !ok {
			return nil, fmt.Errorf("usage names protocol %q: want nats or kafka", d.Protocol)
		}
		var ct *compile.Tenant
		for i := range fc.Tenants {
			if fc.Tenants[i].Name == d.Tenant {
				ct = &fc.Tenants[i]
			}
		}
		if ct == nil {
			return nil, fmt.Errorf("the proposed policies have no tenant %q (the default tenant's policy is missing)", d.Tenant)
		}
		limits := ct.Limits
		if !ct.Global {
			limits = scaled(limits, replicas)
		} else {
			// Consume buckets are per replica whatever the scope.
			limits = scaledConsume(limits, replicas)
		}
		outcomes, err := sim.Replay(ctx, Trace{Limits: limits, Reject: ct.Reject, Seconds: d.Seconds,
			Clients: clientTraces(ct.Clients, d.Clients)})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", d.Protocol, d.Tenant, err)
		}
		p := policies[d.Tenant]
		ti := TenantImpact{Protocol: d.Protocol, Tenant: d.Tenant, Policy: p.Name, Note: notes[k], Mode: string(p.Mode),
			OnLimit: string(p.OnLimit), Limits: limits, Replicas: replicas, Outcomes: outcomes}
		for _, o := range outcomes {
			ti.Totals.Offered += o.Offered
			ti.Totals.Admitted += o.Admitted
			ti.Totals.RefusedSize += o.RefusedSize
			ti.Totals.RefusedRate += o.RefusedRate
			ti.Totals.RefusedQueue += o.RefusedQueue
			ti.Totals.RefusedClient += o.RefusedClient
			ti.Totals.Delayed += o.Delayed
			ti.Totals.MaxDelayMs = max(ti.Totals.MaxDelayMs, o.MaxDelayMs)
			ti.Totals.Consumed += o.Consumed
			ti.Totals.ReadLagMs = max(ti.Totals.ReadLagMs, o.ReadLagMs)
		}
		if ct.DryRun {
			// dryRun refuses nothing: the refusals are what enforcing would do.
			ti.Mode = string(policy.ModeDryRun)
		}
		out = append(out, ti)
	}
	return out, nil
}

// scaled multiplies a replica's rate, burst and queue bounds by the replicas: what the gateway
// as a whole admits when the load is spread evenly.
func scaled(l compile.Limits, n int) compile.Limits {
	l.MessagesPerSecond, l.BytesPerSecond = times(l.MessagesPerSecond, n), times(l.BytesPerSecond, n)
	l.BurstMessages, l.BurstBytes = times(l.BurstMessages, n), times(l.BurstBytes, n)
	l.QueueMaxMessages = times(l.QueueMaxMessages, n)
	return scaledConsume(l, n)
}

// scaledConsume multiplies a replica's consume bucket by the replicas.
func scaledConsume(l compile.Limits, n int) compile.Limits {
	l.ConsumeBytesPerSecond, l.ConsumeBurstBytes = times(l.ConsumeBytesPerSecond, n), times(l.ConsumeBurstBytes, n)
	return l
}

// times is n times a limit (nil: unlimited stays so).
func times(v *uint64, n int) *uint64 {
	if v == nil {
		return nil
	}
	x := *v * uint64(n)
	return &x
}

// mergeSeconds adds b's seconds into a (both ascending).
func mergeSeconds(a, b []Second) []Second {
	out := make([]Second, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].StartMs < b[j].StartMs:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].StartMs < a[i].StartMs:
			out = append(out, b[j])
			j++
		default:
			out = append(out, Second{StartMs: a[i].StartMs, Messages: a[i].Messages + b[j].Messages, Bytes: a[i].Bytes + b[j].Bytes,
				Consumed: a[i].Consumed + b[j].Consumed})
			i, j = i+1, j+1
		}
	}
	return out
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
