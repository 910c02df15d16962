package kubesource

import (
	"errors"
	"fmt"
	"strings"

	"github.com/weighstation/weighstation/control-plane/internal/policy"
)

// The reasons of the Accepted condition (Gateway API policy conventions, GEP-713).
const (
	ReasonAccepted     = "Accepted"
	ReasonInvalid      = "Invalid"      // the object breaks a rule, alone or with the defaults
	ReasonConflicted   = "Conflicted"   // valid, but an older object has its tenant or an identity
	ReasonNotPermitted = "NotPermitted" // outside the grants of its namespace
	ReasonPending      = "Pending"      // nothing to judge it against: no valid GatewayDefaults
)

// verdict is what the evaluation made of one object's current generation.
type verdict struct {
	Generation int64
	Reason     string
	Message    string
	// InForce is the generation the gateways are given: this one when accepted, an earlier
	// accepted one when this one is Invalid or Conflicted, else 0 (none: the object is ignored).
	InForce int64
}

// evaluation is the policy set the objects make and the verdict on each.
type evaluation struct {
	Set      *policy.Set // nil when no valid set: Err says why
	Err      error
	Verdicts map[string]verdict // by ref
}

// accepted is an object generation that was in force: an invalid or conflicting edit leaves it
// there, as a refused file change leaves the last good directory.
type accepted struct {
	UID        string
	Generation int64
	Document   []byte
}

// evaluator remembers the last accepted generation of each object between evaluations.
type evaluator struct {
	platformNS string
	lastGood   map[string]accepted
}

func newEvaluator(platformNS string) *evaluator {
	return &evaluator{platformNS: platformNS, lastGood: map[string]accepted{}}
}

// candidate is one generation of an object, tried against what is already in force.
type candidate struct {
	obj        object
	generation int64
	doc        []byte
}

func (e *evaluator) evaluate(defaults, policies []object) evaluation {
	ev := evaluation{Verdicts: map[string]verdict{}}
	docs := map[string][]byte{}
	good := map[string]accepted{}
	present := map[string]bool{}

	oldestFirst(defaults)
	var gd *policy.GatewayDefaults
	var gdRef string
	for _, o := range defaults {
		present[o.ref()] = true
		v, in := e.judge(o, func(c candidate) (string, string) {
			_, d, err := policy.ParseObject(c.obj.ref(), c.doc)
			if err != nil {
				return ReasonInvalid, messages(err)
			}
			if gd != nil {
				return ReasonConflicted, fmt.Sprintf("GatewayDefaults %q is in force: a gateway has one", gd.Name)
			}
			gd, gdRef = d, c.obj.ref()
			return ReasonAccepted, ""
		})
		ev.Verdicts[o.ref()] = v
		if in != nil {
			docs[o.ref()], good[o.ref()] = in.doc, accepted{o.UID, in.generation, in.doc}
		}
	}

	oldestFirst(policies)
	var inForce []policy.LimitPolicy
	for _, o := range policies {
		present[o.ref()] = true
		if gd == nil {
			ev.Verdicts[o.ref()] = verdict{Generation: o.Generation, Reason: ReasonPending, Message: "no GatewayDefaults is accepted: there are no defaults to resolve this policy against"}
			continue
		}
		v, in := e.judge(o, func(c candidate) (string, string) {
			lp, _, err := policy.ParseObject(c.obj.ref(), c.doc)
			if err != nil {
				return ReasonInvalid, messages(err)
			}
			if lp == nil {
				return ReasonInvalid, "kind: must be LimitPolicy"
			}
			lp.Name = c.obj.Namespace + "/" + c.obj.Name
			if ok, why := permitted(c.obj.Namespace, e.platformNS, lp, gd); !ok {
				return ReasonNotPermitted, why
			}
			_, errs := policy.Resolve(*gd, append(append([]policy.LimitPolicy{}, inForce...), *lp), "")
			var own policy.Errors
			conflict := true
			for _, err := range errs {
				if err.Pos.File == c.obj.ref() {
					own = append(own, err)
					conflict = conflict && err.Conflict
				}
			}
			if len(own) > 0 {
				if conflict {
					return ReasonConflicted, messages(own)
				}
				return ReasonInvalid, messages(own)
			}
			inForce = append(inForce, *lp)
			return ReasonAccepted, ""
		})
		ev.Verdicts[o.ref()] = v
		if in != nil {
			docs[o.ref()], good[o.ref()] = in.doc, accepted{o.UID, in.generation, in.doc}
		}
	}
	e.lastGood = good

	if gd == nil {
		ev.Err = errors.New("no GatewayDefaults object is accepted")
		return ev
	}
	set, errs := policy.Resolve(*gd, inForce, contentHash(docs))
	if len(errs) > 0 {
		// What is left concerns the defaults (their tenant has no accepted LimitPolicy): the
		// last published set stays in force.
		v := ev.Verdicts[gdRef]
		v.Reason, v.Message = ReasonInvalid, messages(errs)
		ev.Verdicts[gdRef] = v
		ev.Err = errs
		return ev
	}
	ev.Set = set
	return ev
}

// judge tries an object's current generation and, when that is Invalid or Conflicted, the
// generation last in force; it returns the verdict and the candidate now in force (or nil).
// A NotPermitted generation keeps nothing in force: a grant withdrawn takes effect.
func (e *evaluator) judge(o object, try func(candidate) (reason, message string)) (verdict, *candidate) {
	cur := candidate{o, o.Generation, o.document()}
	reason, msg := try(cur)
	v := verdict{Generation: o.Generation, Reason: reason, Message: msg}
	if reason == ReasonAccepted {
		v.InForce = o.Generation
		return v, &cur
	}
	last, ok := e.lastGood[o.ref()]
	if reason == ReasonNotPermitted || !ok || last.UID != o.UID || last.Generation == o.Generation {
		return v, nil
	}
	prev := candidate{o, last.Generation, last.Document}
	if r, _ := try(prev); r != ReasonAccepted {
		return v, nil
	}
	v.InForce = last.Generation
	v.Message += fmt.Sprintf(" (generation %d stays in force)", last.Generation)
	return v, &prev
}

// messages lists errors without the object's own name, which the status already carries.
func messages(err error) string {
	var errs policy.Errors
	if !errors.As(err, &errs) {
		return err.Error()
	}
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Field + ": " + e.Reason
	}
	return strings.Join(parts, "; ")
}
