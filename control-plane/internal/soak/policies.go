package soak

import (
	"fmt"
	"strings"
)

// The soak's tenants. Each has a NATS user of its name (password "<name>-secret") and Kafka
// client ids starting "<name>-".
const (
	TenantDelay   = "soak-delay"   // over its rate at times: held, and refused once its queue is full
	TenantReject  = "soak-reject"  // over its rate at times: refused at once
	TenantDryRun  = "soak-dry"     // far over its rate: counted as would-refuse, never refused
	TenantFree    = "soak-free"    // no rate limit: never refused
	TenantHostile = "soak-hostile" // the hostile clients: 5 connections, 1 KiB messages
	TenantProbe   = "soak-probe"   // the 2 GiB length probes: many connections, 64 KiB messages
)

// LoadTenants carry the accounted load.
var LoadTenants = []string{TenantDelay, TenantReject, TenantDryRun, TenantFree}

// Tenants are every soak tenant (each needs a NATS user).
var Tenants = append(append([]string{}, LoadTenants...), TenantHostile, TenantProbe)

// PolicyStep is one step of the policy flip cycle.
type PolicyStep int

const (
	StepBase         PolicyStep = iota
	StepRatesHalved             // every rate halved
	StepRatesDoubled            // every rate doubled, and the delay and reject tenants swap onLimit
	StepOverride                // base rates, with an override on the reject tenant's JetStream subjects and acks=all topic
	policySteps
)

func (s PolicyStep) String() string {
	return [...]string{"base", "rates halved", "rates doubled, delay and reject swapped", "override added"}[s]
}

// Next is the step after s; the cycle repeats.
func (s PolicyStep) Next() PolicyStep { return (s + 1) % policySteps }

// Base rates (messages/s) of the limited tenants. The load (NATSRates, KafkaRates) is sized
// against them: the delay and reject tenants go over when their rates are halved, and the
// reject tenant's NATS load is over its base rate all the time.
const (
	delayRate  = 80
	rejectRate = 50
	dryRate    = 20
)

// scale is what a step multiplies every rate by.
func (s PolicyStep) scale() float64 {
	switch s {
	case StepRatesHalved:
		return 0.5
	case StepRatesDoubled:
		return 2
	}
	return 1
}

// queueMax is the delay and reject tenants' queue.maxMessages.
const queueMax = 50

// PolicyYAML is the soak's policy file at a step of the cycle.
func PolicyYAML(step PolicyStep) string {
	scale := step.scale()
	delayMode, rejectMode := "delay", "reject"
	if step == StepRatesDoubled {
		delayMode, rejectMode = "reject", "delay"
	}
	var b strings.Builder
	b.WriteString("# Written by the soak (control-plane/internal/soak): step " + step.String() + ".\n")
	doc := func(tenant, mode, onLimit, limits, extra string) {
		fmt.Fprintf(&b, `---
apiVersion: weighstation.io/v1alpha1
kind: LimitPolicy
metadata:
  name: %[1]s
spec:
  tenant: %[1]s
  identify:
    nats: { users: [%[1]s] }
    kafka: { clientIdPrefixes: ["%[1]s-"] }
  mode: %[2]s
  onLimit: %[3]s
  limits:
%[4]s%[5]s`, tenant, mode, onLimit, limits, extra)
	}
	rate := func(r float64, burst int) string {
		return fmt.Sprintf("    rate: { messagesPerSecond: %g, burstMessages: %d }\n", r*scale, burst)
	}
	queue := fmt.Sprintf("    queue: { maxMessages: %d, maxWait: 2s }\n", queueMax)
	doc(TenantDelay, "enforce", delayMode, "    maxMessageBytes: 64KiB\n"+rate(delayRate, 40)+"    inFlight: 100\n"+queue, "")
	override := ""
	if step == StepOverride {
		override = fmt.Sprintf(`  overrides:
    - match: { nats: ["soak.%[1]s.js.>"], kafka: ["soak-%[1]s-acksall"] }
      limits: { rate: { messagesPerSecond: 5, burstMessages: 5 } }
`, TenantReject)
	}
	doc(TenantReject, "enforce", rejectMode, "    maxMessageBytes: 64KiB\n"+rate(rejectRate, 20)+"    inFlight: 100\n"+queue, override)
	doc(TenantDryRun, "dryRun", "reject", "    maxMessageBytes: 64KiB\n"+rate(dryRate, 10), "")
	doc(TenantFree, "enforce", "reject", "    maxMessageBytes: 1MiB\n", "")
	doc(TenantHostile, "enforce", "reject", "    maxMessageBytes: 1KiB\n    connections: 5\n"+rate(50, 50), "")
	doc(TenantProbe, "enforce", "reject", "    maxMessageBytes: 64KiB\n", "")
	return b.String()
}

// QueueBound is the most messages the soak's tenants may hold at once: the delay and reject
// tenants' queues (50 each, one per protocol; the reject tenant holds when swapped to delay).
const QueueBound = 2 * 2 * queueMax
