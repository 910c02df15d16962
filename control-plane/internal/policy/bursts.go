package policy

// A client's and an override's buckets sit inside their tenant's: every message they admit is
// charged to the tenant's bucket too, at once. So the tenant's bucket must keep room for the
// others after one client (or the traffic of one override) spends its whole burst.
//
// A burst left out is one second of the bucket's rate, but at most a quarter of the tenant's
// burst. Why a quarter is enough, with one client at ten times its limit: its burst takes at
// most 1/4 of the tenant's bucket; the gateway worker that serves it may hold a block of what
// is left, at most an eighth of it (wasm-filter/core/src/leases, MAX_SHARE_OF_BURST); so at
// least 3/4 × 7/8 ≈ 65% of the tenant's bucket stays for the others, and a neighbour that
// spends its own default burst at that very moment still leaves about 40%. After that the
// noisy client is paced at its own rate, and the tenant's bucket refills as long as the
// clients' steady rates sum to less than the tenant's (else the tenant is over its limit,
// and refusing it is right). A larger share would let two bursts at once empty the bucket.
const tenantBurstShare = 4

// defaultBurst is the depth of a client's or override's bucket that sets none: one second of
// rate, at most its tenant's depth ÷ tenantBurstShare, but never below floor (one message; for
// bytes, one message of the maximum size, so that the rule burstBytes ≥ maxMessageBytes holds
// wherever the rate allows it). tenantDepth nil: the tenant has no such bucket.
func defaultBurst(rate uint64, tenantDepth *uint64, floor uint64) uint64 {
	if tenantDepth == nil {
		return rate
	}
	return min(rate, max(*tenantDepth/tenantBurstShare, floor))
}

// depth is the depth of a tenant's bucket as the filter builds it: its burst, or one second of
// its rate when the burst is unlimited (wasm-filter/core/src/limits/resolved.rs). nil: the
// tenant has no such bucket.
func depth(burst, rate *uint64) *uint64 {
	if burst != nil {
		return burst
	}
	return rate
}

// warnEmptiesTenant warns of a burst a policy sets on a client or override that is at least
// its tenant's: spent at once, it empties the tenant's bucket, and the tenant's other
// messages are refused (or held) until it refills. A warning, not an error: such a burst is
// what its author may want (one client that alone uses the tenant).
func warnEmptiesTenant(q Quantity, field, of string, tenantDepth *uint64, rate uint64, floor uint64, c *collector) {
	if !q.Finite() || tenantDepth == nil || q.Value < *tenantDepth {
		return
	}
	c.warn(q.Pos, field, "%d is at least the tenant's burst (%d): spent at once by %s, it empties the tenant's bucket, "+
		"and the tenant's other messages are refused or held until it refills; leave it out (the default here is %d) or set it below %d",
		q.Value, *tenantDepth, of, defaultBurst(rate, tenantDepth, floor), *tenantDepth)
}
