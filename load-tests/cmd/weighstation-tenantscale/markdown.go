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
	l := fmt.Sprintf("start %s, change in force median %s max %s, acknowledged median %s; Envoy RSS %d → %d MiB (%+.1f%%), control plane %d → %d MiB",
		r.start.Round(time.Millisecond), median(r.inForce).Round(time.Millisecond), slices.Max(r.inForce).Round(time.Millisecond),
		median(r.acked).Round(time.Millisecond), r.envoyFirst/1024, r.envoyMost/1024, r.growth()*100, r.cpFirst/1024, r.cpMost/1024)
	if r.source == "kubernetes" {
		l += fmt.Sprintf("; kubectl apply of all %s; after the control plane's start, conditions current on all %s, every status written %s",
			r.created.Round(time.Millisecond), r.conditionsDone.Round(time.Second), r.statusDone.Round(time.Second))
	}
	return l
}

// row is a rung's line of the table, labelled by its source.
func (r rung) row() string {
	verdict := "met"
	if !r.met() {
		verdict = "**not met**"
	}
	return fmt.Sprintf("| %s | %d | %s | %s / %s | %s | %d → %d MiB (%+.1f%%) | %d → %d MiB | %s |",
		r.source, r.tenants, r.start.Round(time.Millisecond), median(r.inForce).Round(time.Millisecond), slices.Max(r.inForce).Round(time.Millisecond),
		median(r.acked).Round(time.Millisecond), r.envoyFirst/1024, r.envoyMost/1024, r.growth()*100, r.cpFirst/1024, r.cpMost/1024, verdict)
}

const kubeHeading = "## Policies as Kubernetes objects"

// markdown is the README: this run's rows, and the rows of the other source that old (the README
// as it was) holds, so that `make bench-tenants` and `make bench-tenants-kube` each leave the
// other's figures. A row of the table before it had a source column is a files row.
func markdown(rungs []rung, old string) string {
	source := rungs[0].source
	var kept, keptKube []string
	inKube := false
	for _, l := range strings.Split(old, "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			inKube = l == kubeHeading
		case !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| source") || strings.HasPrefix(l, "| tenants") || strings.HasPrefix(l, "| objects"):
		case inKube:
			if source != "kubernetes" {
				keptKube = append(keptKube, l)
			}
		case strings.Count(l, "|") == 8: // before the source column
			if source != "files" {
				kept = append(kept, "| files "+l)
			}
		case !strings.HasPrefix(l, "| "+source+" |"):
			kept = append(kept, l)
		}
	}
	var b strings.Builder
	b.WriteString(`# Tenants at scale (make bench-tenants, make bench-tenants-kube)

The local stack with N LimitPolicies (one NATS user and one override each), one Envoy with two
workers; *source* is where the control plane reads them: *files*, one each in its policy
directory, or *kubernetes*, LimitPolicy objects of a real kube-apiserver and etcd it watches
(` + "`--policy-source=kubernetes`" + `). *Start*: from Envoy's process start to the stack reporting it in
sync and listening. *Change*: the measured tenant's policy set to a rate of 1/s, a file rewritten
or the object changed with ` + "`kubectl apply`" + `, from the write (kubectl's return) to the first refusal
an already open connection of that tenant was sent, over ` + fmt.Sprint(len(rungs[0].inForce)) + ` changes (each set back after,
*acknowledged* timing that). *RSS*: at the first acknowledgement, and the most after any change.
Goals: a change in force within 1 s up to 10,000 tenants and 5 s at 100,000; Envoy's RSS within
+10%.

| source | tenants | start | change in force (median / max) | set back acknowledged (median) | Envoy RSS first → most | control plane RSS first → most | goals |
|:--|---:|---:|---:|---:|---:|---:|:--|
`)
	var rows []string
	for _, r := range rungs {
		rows = append(rows, r.row())
	}
	if source == "files" {
		rows = append(rows, kept...)
	} else {
		rows = append(kept, rows...)
	}
	for _, l := range rows {
		b.WriteString(l + "\n")
	}
	kube := keptKube
	if source == "kubernetes" {
		kube = nil
		for _, r := range rungs {
			kube = append(kube, fmt.Sprintf("| %d | %s | %s | %s |", r.tenants, r.created.Round(time.Millisecond),
				r.conditionsDone.Round(time.Second), r.statusDone.Round(time.Second)))
		}
	}
	if len(kube) > 0 {
		b.WriteString("\n" + kubeHeading + `

*kubectl apply*: one ` + "`kubectl apply -f`" + ` of a file of all N objects, before the stack starts.
*Conditions current*: from the control plane's start until every object's Accepted and
Programmed conditions were seen current (observedGeneration, Programmed True; looked at every
10 s). *Every status written*: to the last object's status written (the time of the control
plane's status update in the objects' managedFields, to the second); usage is written only for
a tenant with traffic, here the measured one. The changes above are made meanwhile; status
writes are limited to 50 requests a second.

| objects | kubectl apply of all | conditions current | every status written |
|---:|---:|---:|---:|
`)
		for _, l := range kube {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
