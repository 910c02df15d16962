package policy

// Admission judges LimitPolicies one at a time against the GatewayDefaults and the policies
// admitted before it, by the rules Resolve checks across a whole set: what a Kubernetes
// object's Accepted condition says. Each judgement costs one policy's checks, so judging n
// objects costs n, not n² (which Resolve over all those before each would: minutes at 10,000).
type Admission struct {
	gd     GatewayDefaults
	claims *registry
}

func NewAdmission(gd GatewayDefaults) *Admission {
	return &Admission{gd: gd, claims: newRegistry(0)}
}

// Admit returns lp's errors among the policies admitted so far, and admits it if it has none.
func (a *Admission) Admit(lp LimitPolicy) Errors {
	c := &collector{}
	a.claims.check(&lp, a.gd, c)
	resolveTenant(&lp, a.gd, c)
	if len(c.errs) > 0 {
		return c.errs.sorted()
	}
	a.claims.add(&lp)
	return nil
}
