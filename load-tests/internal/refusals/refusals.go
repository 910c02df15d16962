// Package refusals says, from the refusals a run received, whether the gateway's limits rather
// than its latency shaped it: which tenant, which limit, and what share of the operations. A run
// whose target refused more than [Threshold] of what it was sent measured the limit, not the
// gateway: its admitted remainder's latency is not the target's latency at the offered rate.
package refusals

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Threshold is the share of refused operations above which a target was limited by policy.
const Threshold = 0.01

// Reason is one limit that refused, as the refusals named it.
type Reason struct {
	// Tenant and Client as the refusal names them (a Kafka error code names neither).
	Tenant string `json:"tenant,omitempty"`
	Client string `json:"client,omitempty"`
	// Limit is the policy field (rate, inFlight, queue, connections, maxMessageBytes), "permission"
	// for a subject or topic not granted, or the Kafka error code when that is all there is.
	Limit string `json:"limit"`
	// Value is the limit's value as the refusal states it ("100 messages/s").
	Value string `json:"value,omitempty"`
	Count int64  `json:"count"`
	// Sample is one refusal as the client received it.
	Sample string `json:"sample"`
}

// Describe is the reason in a line: "rate limit of tenant anonymous: 100 messages/s".
func (r Reason) Describe() string {
	var b strings.Builder
	b.WriteString(r.Limit)
	b.WriteString(" limit")
	if r.Client != "" {
		b.WriteString(" of client " + r.Client)
	}
	if r.Tenant != "" {
		b.WriteString(" of tenant " + r.Tenant)
	}
	if r.Value != "" {
		b.WriteString(": " + r.Value)
	}
	return b.String()
}

// The detail the gateway puts in every refusal it words (contract §4): "(rate limit of client
// billing-a of tenant billing: 100 messages/s)".
var detail = regexp.MustCompile(`(\w+) limit of (?:client (\S+) of )?tenant ([^:]+): (.*)\)`)

// Parse reads the reason out of a refusal's text.
func Parse(text string) Reason {
	r := Reason{Sample: text}
	if m := detail.FindStringSubmatch(text); m != nil {
		r.Limit, r.Client, r.Tenant, r.Value = m[1], m[2], m[3], strings.TrimSpace(m[4])
		return r
	}
	if strings.Contains(text, "Permissions Violation") {
		r.Limit = "permission"
		return r
	}
	r.Limit = "unnamed"
	return r
}

// Tally counts refusals by reason; safe for concurrent use.
type Tally struct {
	mu     sync.Mutex
	counts map[key]*Reason
}

// key is what tells two reasons apart.
type key struct{ tenant, client, limit, value string }

// Text counts a refusal told in words (NATS -ERR, a Kafka error message).
func (t *Tally) Text(text string) { t.add(Parse(text)) }

// Code counts a refusal told only by an error code (sarama keeps no Produce error message).
func (t *Tally) Code(code string) { t.add(Reason{Limit: code, Sample: code}) }

func (t *Tally) add(r Reason) {
	k := key{r.Tenant, r.Client, r.Limit, r.Value}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[key]*Reason{}
	}
	got, ok := t.counts[k]
	if !ok {
		got = &r
		t.counts[k] = got
	}
	got.Count++
}

// Reasons are the counted reasons, most frequent first.
func (t *Tally) Reasons() []Reason {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Reason, 0, len(t.counts))
	for _, r := range t.counts {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Describe() < out[j].Describe()
	})
	return out
}

// Limited is the verdict on a target whose limits shaped the run.
type Limited struct {
	// RefusedShare is refused ÷ sent.
	RefusedShare float64 `json:"refusedShare"`
	// Reasons are the limits that refused, as the refusals named them, most frequent first;
	// empty when the refusals named none (a bare no-responders reply, whose -ERR was lost).
	Reasons []Reason `json:"reasons"`
}

// Judge says whether a target that was sent `sent` operations, `refused` of them refused, was
// limited by policy; nil if not.
func Judge(sent, refused int64, reasons []Reason) *Limited {
	if sent == 0 || float64(refused)/float64(sent) <= Threshold {
		return nil
	}
	return &Limited{RefusedShare: float64(refused) / float64(sent), Reasons: reasons}
}

// Headline is what a report says first of a limited target.
func (l *Limited) Headline(target string) string {
	var b strings.Builder
	b.WriteString("LIMITED BY POLICY: ")
	b.WriteString(target)
	b.WriteString(" refused ")
	b.WriteString(fmt.Sprintf("%.1f%%", 100*l.RefusedShare))
	b.WriteString(" of what it was sent")
	if len(l.Reasons) > 0 {
		b.WriteString(" (")
		for i, r := range l.Reasons {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(r.Describe())
		}
		b.WriteString(")")
	}
	return b.String()
}
