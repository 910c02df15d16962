package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// changeGoal is how soon one change must be in force at a tenant count; rssGoal how much
// Envoy's RSS may grow over the changes.
func changeGoal(tenants int) time.Duration {
	if tenants > 10_000 {
		return 5 * time.Second
	}
	return time.Second
}

const rssGoal = 0.10

func (r rung) growth() float64 {
	return float64(r.envoyMost-r.envoyFirst) / float64(max(r.envoyFirst, 1))
}

func (r rung) met() bool {
	return slices.Max(r.inForce) <= changeGoal(r.tenants) && r.growth() <= rssGoal
}

func (r rung) line() string {
	return fmt.Sprintf("start %s, change in force median %s max %s, acknowledged median %s; Envoy RSS %d → %d MiB (%+.1f%%), control plane %d → %d MiB",
		r.start.Round(time.Millisecond), median(r.inForce).Round(time.Millisecond), slices.Max(r.inForce).Round(time.Millisecond),
		median(r.acked).Round(time.Millisecond), r.envoyFirst/1024, r.envoyMost/1024, r.growth()*100, r.cpFirst/1024, r.cpMost/1024)
}

func markdown(rungs []rung) string {
	var b strings.Builder
	b.WriteString(`# Tenants at scale (make bench-tenants)

The local stack with N LimitPolicies (one NATS user and one override each, a file each), one
Envoy with two workers. *Start*: from Envoy's process start to the stack reporting it in sync and
listening. *Change*: one policy file rewritten to a rate of 1/s, from the write to the first refusal
an already open connection of that tenant was sent, over ` + fmt.Sprint(len(rungs[0].inForce)) + ` changes (each rewritten back
after, *acknowledged* timing that). *RSS*: at the first acknowledgement, and the most after any
change. Goals: a change in force within 1 s up to 10,000 tenants and 5 s at 100,000; Envoy's RSS
within +10%.

| tenants | start | change in force (median / max) | rewrite back acknowledged (median) | Envoy RSS first → most | control plane RSS first → most | goals |
|---:|---:|---:|---:|---:|---:|:--|
`)
	for _, r := range rungs {
		verdict := "met"
		if !r.met() {
			verdict = "**not met**"
		}
		fmt.Fprintf(&b, "| %d | %s | %s / %s | %s | %d → %d MiB (%+.1f%%) | %d → %d MiB | %s |\n",
			r.tenants, r.start.Round(time.Millisecond), median(r.inForce).Round(time.Millisecond), slices.Max(r.inForce).Round(time.Millisecond),
			median(r.acked).Round(time.Millisecond), r.envoyFirst/1024, r.envoyMost/1024, r.growth()*100, r.cpFirst/1024, r.cpMost/1024, verdict)
	}
	return b.String()
}
