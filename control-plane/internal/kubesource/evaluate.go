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
	// Earlier is that earlier generation, when it is the one in force: the status keeps it,
	// so that every replica, and this one after a restart, keeps it in force too.
	Earlier *accepted
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
	Spec       map[string]any
}

// evaluator remembers the last accepted generation of each object between evaluations; the
// objects' status carries the same (status.inForce) for replicas that did not see it.
type evaluator struct {
	platformNS string
	lastGood   map[string]accepted
	// parsed is each object generation as rendered and decoded at the last evaluation, and
	// parsing what this one decoded: an object unchanged since is not rendered and decoded
	// again (at 10,000 objects that is most of an evaluation's second).
	parsed, parsing map[parseKey]parsedDoc
}

// parseKey is one generation of one object: Kubernetes moves metadata.generation on every
// change of the spec, so an object's rendering and decoding hold until it moves.
type parseKey struct {
	uid        string
	generation int64
}

type parsedDoc struct {
	doc []byte
	lp  *policy.LimitPolicy
	gd  *policy.GatewayDefaults
	err error
}

func newEvaluator(platformNS string) *evaluator {
	return &evaluator{platformNS: platformNS, lastGood: map[string]accepted{}, parsed: map[parseKey]parsedDoc{}}
}

// parse renders and decodes a candidate, or takes what the last evaluation made of it.
func (e *evaluator) parse(c candidate) parsedDoc {
	k := parseKey{c.obj.UID, c.generation}
	p, ok := e.parsing[k]
	if !ok {
		if p, ok = e.parsed[k]; !ok {
			p.doc = c.document()
			p.lp, p.gd, p.err = policy.ParseObject(c.obj.ref(), p.doc)
		}
		e.parsing[k] = p
	}
	return p
}

// candidate is one generation of an object, tried against what is already in force.
type candidate struct {
	obj        object
	generation int64
	spec       map[string]any
}

func (c candidate) document() []byte { return render(c.obj.Kind, c.obj.Name, c.spec) }

// evaluate judges every object. When the defaults in force cannot resolve with the policies
// (their tenant has no accepted LimitPolicy), their previous accepted generation is tried
// instead; when no set resolves, nothing is remembered and the last published set stays.
func (e *evaluator) evaluate(defaults, policies []object) evaluation {
	e.parsing = map[parseKey]parsedDoc{}
	defer func() { e.parsed, e.parsing = e.parsing, nil }()
	ev, good, gdObj := e.pass(defaults, policies, nil)
	if ev.Set == nil && gdObj != nil {
		if prev, ok := e.previous(*gdObj); ok && prev.Generation != ev.Verdicts[gdObj.ref()].InForce {
			if ev2, good2, _ := e.pass(defaults, policies, &prev); ev2.Set != nil {
				v := ev.Verdicts[gdObj.ref()]
				v.InForce, v.Earlier = prev.Generation, &prev
				v.Message += fmt.Sprintf(" (generation %d stays in force)", prev.Generation)
				ev2.Verdicts[gdObj.ref()] = v
				ev, good = ev2, good2
			}
		}
	}
	if ev.Set != nil {
		e.lastGood = good
	}
	return ev
}

// pass judges the objects once; defaultsAs, if set, is the generation of the defaults to take
// in place of their current one. It returns what is in force and the defaults object used.
func (e *evaluator) pass(defaults, policies []object, defaultsAs *accepted) (evaluation, map[string]accepted, *object) {
	ev := evaluation{Verdicts: map[string]verdict{}}
	docs := map[string][]byte{}
	good := map[string]accepted{}
	keep := func(o object, v verdict, in *candidate) {
		ev.Verdicts[o.ref()] = v
		if in != nil {
			docs[o.ref()], good[o.ref()] = e.parse(*in).doc, accepted{o.UID, in.generation, in.spec}
		}
	}

	oldestFirst(defaults)
	var gd *policy.GatewayDefaults
	var gdObj *object
	for _, o := range defaults {
		try := func(c candidate) (string, string) {
			p := e.parse(c)
			d, err := p.gd, p.err
			if err != nil {
				return ReasonInvalid, messages(err)
			}
			if gd != nil {
				return ReasonConflicted, fmt.Sprintf("GatewayDefaults %q is in force: a gateway has one", gd.Name)
			}
			gd, gdObj = d, &o
			return ReasonAccepted, ""
		}
		if defaultsAs != nil && defaultsAs.UID == o.UID {
			c := candidate{o, defaultsAs.Generation, defaultsAs.Spec}
			if r, msg := try(c); r != ReasonAccepted {
				keep(o, verdict{Generation: o.Generation, Reason: r, Message: msg}, nil)
			} else {
				keep(o, verdict{Generation: o.Generation, Reason: r, InForce: c.generation, Earlier: defaultsAs}, &c)
			}
			continue
		}
		v, in := e.judge(o, try)
		keep(o, v, in)
	}

	oldestFirst(policies)
	var inForce []policy.LimitPolicy
	var admission *policy.Admission
	if gd != nil {
		admission = policy.NewAdmission(*gd)
	}
	for _, o := range policies {
		if gd == nil {
			// Nothing to judge it against; the gateways keep what they were given.
			v := verdict{Generation: o.Generation, Reason: ReasonPending, Message: "no GatewayDefaults is accepted: there are no defaults to resolve this policy against"}
			if prev, ok := e.previous(o); ok {
				v.InForce = prev.Generation
				if prev.Generation != o.Generation {
					v.Earlier = &prev
				}
			}
			ev.Verdicts[o.ref()] = v
			continue
		}
		v, in := e.judge(o, func(c candidate) (string, string) {
			p := e.parse(c)
			if p.err != nil {
				return ReasonInvalid, messages(p.err)
			}
			if p.lp == nil {
				return ReasonInvalid, "kind: must be LimitPolicy"
			}
			lp := *p.lp
			lp.Name = c.obj.Namespace + "/" + c.obj.Name
			if ok, why := permitted(c.obj.Namespace, e.platformNS, &lp, gd); !ok {
				return ReasonNotPermitted, why
			}
			own := admission.Admit(lp)
			conflict := true
			for _, err := range own {
				conflict = conflict && err.Conflict
			}
			if len(own) > 0 {
				if conflict {
					return ReasonConflicted, messages(own)
				}
				return ReasonInvalid, messages(own)
			}
			inForce = append(inForce, lp)
			return ReasonAccepted, ""
		})
		keep(o, v, in)
	}

	if gd == nil {
		ev.Err = errors.New("no GatewayDefaults object is accepted")
		return ev, good, nil
	}
	set, errs := policy.Resolve(*gd, inForce, contentHash(docs))
	if len(errs) > 0 {
		// What is left concerns the defaults: their tenant has no accepted LimitPolicy.
		v := ev.Verdicts[gdObj.ref()]
		v.Reason, v.Message = ReasonInvalid, messages(errs)
		ev.Verdicts[gdObj.ref()] = v
		ev.Err = errs
		return ev, good, gdObj
	}
	ev.Set = set
	warn(ev.Verdicts, set.Warnings)
	return ev, good, gdObj
}

// warn gives each accepted object its warnings (findings that leave it valid): the message of
// an accepted verdict, as an invalid one's errors are.
func warn(verdicts map[string]verdict, warnings policy.Errors) {
	own := map[string]policy.Errors{}
	for _, w := range warnings {
		own[w.Pos.File] = append(own[w.Pos.File], w)
	}
	for ref, ws := range own {
		if v, ok := verdicts[ref]; ok && v.Reason == ReasonAccepted {
			v.Message = messages(ws)
			verdicts[ref] = v
		}
	}
}

// previous is the object's generation last in force: as this process remembers it, else as
// its status says (written by whichever replica held the Lease).
func (e *evaluator) previous(o object) (accepted, bool) {
	if last, ok := e.lastGood[o.ref()]; ok && last.UID == o.UID {
		return last, true
	}
	if o.InForce != nil {
		return *o.InForce, true
	}
	return accepted{}, false
}

// judge tries an object's current generation and, when that is Invalid or Conflicted, the
// generation last in force; it returns the verdict and the candidate now in force (or nil).
// A NotPermitted generation keeps nothing in force: a grant withdrawn takes effect.
func (e *evaluator) judge(o object, try func(candidate) (reason, message string)) (verdict, *candidate) {
	cur := candidate{o, o.Generation, o.Spec}
	reason, msg := try(cur)
	v := verdict{Generation: o.Generation, Reason: reason, Message: msg}
	if reason == ReasonAccepted {
		v.InForce = o.Generation
		return v, &cur
	}
	last, ok := e.previous(o)
	if reason == ReasonNotPermitted || !ok || last.Generation == o.Generation {
		return v, nil
	}
	prev := candidate{o, last.Generation, last.Spec}
	if r, _ := try(prev); r != ReasonAccepted {
		return v, nil
	}
	v.InForce, v.Earlier = last.Generation, &last
	v.Message += fmt.Sprintf(" (generation %d stays in force)", last.Generation)
	return v, &prev
}

// messages lists errors (or warnings) without the object's own name, which the status already
// carries.
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
