package soak

import (
	"fmt"
	"time"
)

// StepAt is when the policy moved to a step (the first is the base step at the load's start).
type StepAt struct {
	At   time.Time
	Step PolicyStep
}

// flipGrace: a change is in force on every Envoy within it (the contract's 2 s); a message sent
// that soon after a flip may meet either step's limits.
const flipGrace = 2 * time.Second

// delayOffered is what the delay tenant offers each protocol, per second.
func delayOffered(protocol string) float64 {
	rates := NATSRates
	if protocol == "kafka" {
		rates = KafkaRates
	}
	total := 0.0
	for _, r := range rates {
		total += r
	}
	return total
}

// delayOver says whether the delay tenant's load on a protocol is at or over its rate in a step:
// only then may it be refused (its queue full, or a message held past maxWait).
func delayOver(step PolicyStep, protocol string) bool {
	return delayOffered(protocol) >= delayRate*step.scale()
}

// DelayRefusals checks the delay tenant's refusals on one protocol against what its policy
// steps allow: none for a message sent outside the steps that put it at or over its rate (a
// flip's first flipGrace belongs to both steps) and outside every fault on its path; and in
// those steps together at most the load above the rate over the step (and its grace), plus a
// full queue, each. It returns why not, or "".
func DelayRefusals(protocol string, refusedSent []time.Time, steps []StepAt, end time.Time, faults []Window) string {
	bound := 0.0
	for i, s := range steps {
		if !delayOver(s.Step, protocol) {
			continue
		}
		until := end
		if i+1 < len(steps) {
			until = steps[i+1].At
		}
		excess := delayOffered(protocol) - delayRate*s.Step.scale()
		bound += excess*(until.Sub(s.At)+flipGrace).Seconds() + queueMax
	}
	outside, inSteps := 0, 0
	for _, sent := range refusedSent {
		switch {
		case overAt(protocol, steps, sent):
			inSteps++
		case inAnyFault(faults, sent):
		default:
			outside++
		}
	}
	switch {
	case outside > 0:
		return fmt.Sprintf("%s: %d refusals of messages sent while the delay tenant was under its rate and no fault was on", protocol, outside)
	case float64(inSteps) > bound:
		return fmt.Sprintf("%s: %d refusals in the steps that put the delay tenant over its rate, more than the %.0f its excess load and queue allow", protocol, inSteps, bound)
	}
	return ""
}

// overAt: a message sent at t met a step that put the delay tenant at or over its rate. A step
// is in force from its flip until flipGrace after the next one.
func overAt(protocol string, steps []StepAt, t time.Time) bool {
	for i, s := range steps {
		ended := i+1 < len(steps) && !t.Before(steps[i+1].At.Add(flipGrace))
		if !t.Before(s.At) && !ended && delayOver(s.Step, protocol) {
			return true
		}
	}
	return false
}

func inAnyFault(faults []Window, t time.Time) bool {
	for _, w := range faults {
		if w.overlaps(t, t) {
			return true
		}
	}
	return false
}
