//! What a configuration takes from the last one (Config::parse_reusing): each tenant, with its
//! plan, by a hash of its JSON.

use std::collections::HashMap;
use std::rc::Rc;

use super::{Protocol, Tenant, TenantPlan};

/// The tenants of the last configuration of each protocol, by their JSON, for the next one to
/// take unchanged (Config::parse_reusing). Tenants and plans are immutable once built, so
/// configurations share them.
#[derive(Debug, Default)]
pub struct Tenants(pub(super) [TenantsByJson; 2]);

pub(super) type TenantsByJson = HashMap<TenantKey, Parsed>;

/// A tenant as parsed, with its plan and, if it is global, the replica count its concurrency
/// limits were divided by (then it is built again when the count changes, from its source).
#[derive(Debug, Clone)]
pub(super) struct Parsed {
    pub(super) tenant: Rc<Tenant>,
    pub(super) plan: Rc<TenantPlan>,
    /// The tenant as sent: `tenant` itself unless it is global.
    pub(super) source: Rc<Tenant>,
    pub(super) replicas: u64,
}

impl Parsed {
    /// `source` as this many replicas enforce it, with its plan.
    pub(super) fn new(protocol: Protocol, source: Rc<Tenant>, replicas: u64) -> Parsed {
        let tenant = if source.global {
            let mut t = (*source).clone();
            t.split_concurrency(replicas);
            Rc::new(t)
        } else {
            source.clone()
        };
        Parsed {
            plan: Rc::new(TenantPlan::new(protocol, &tenant)),
            tenant,
            source,
            replicas,
        }
    }
}

/// A tenant's JSON, by a hash of its bytes and their length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct TenantKey {
    hash: u64,
    len: usize,
}

impl TenantKey {
    pub(super) fn of(bytes: &[u8]) -> TenantKey {
        TenantKey {
            hash: fingerprint(bytes),
            len: bytes.len(),
        }
    }
}

/// A 64-bit hash of `bytes`, eight at a time (the whole configuration passes through it on each
/// change: 5 MB at 10,000 tenants). Not for hostile input: the control plane wrote the bytes.
fn fingerprint(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(a)).wrapping_mul(K).rotate_left(29);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(K).rotate_left(29);
    }
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::super::{Config, TenantId};
    use super::*;

    /// A tenant whose JSON is unchanged is the last configuration's, not parsed again; a changed
    /// one is parsed; the other protocol's tenants are not mixed in; a global tenant is parsed
    /// again when the replica count its concurrency is divided by changes.
    #[test]
    fn reuses_the_tenants_a_change_left_alone() {
        let doc = |acme_limit: u64, protocol: &str, replicas: u64| {
            format!(
                r#"{{"version":"1","protocol":"{protocol}","defaultTenant":"anonymous",
                "quota":{{"cluster":"q","authority":"q:1","replicas":{replicas},"timeoutMs":100}},"tenants":[
                {{"name":"acme","identify":{{"natsUsers":["acme"]}},"limits":{{"maxMessageBytes":{acme_limit}}}}},
                {{"name":"globex","global":true,"identify":{{"natsUsers":["globex"]}},"limits":{{"inFlight":9}}}},
                {{"name":"anonymous","limits":{{}}}}]}}"#
            )
        };
        let mut known = Tenants::default();
        let parse = |known: &mut Tenants, d: String| match Config::parse_reusing(d.as_bytes(), known) {
            Ok(c) => c,
            Err(e) => unreachable!("{e}"),
        };
        let first = parse(&mut known, doc(100, "nats", 3));
        assert_eq!(first.parsed, vec![0, 1, 2]);
        let second = parse(&mut known, doc(200, "nats", 3));
        assert_eq!(second.parsed, vec![0], "only acme changed");
        assert_eq!(second.tenants[0].limits.max_message_bytes, Some(200));
        assert!(Rc::ptr_eq(&first.tenants[2], &second.tenants[2]));
        assert!(Rc::ptr_eq(&first.plans[2], &second.plans[2]));
        let kafka = parse(&mut known, doc(200, "kafka", 3));
        assert_eq!(kafka.parsed, vec![0, 1, 2], "a Kafka plan is not a NATS one");
        let scaled = parse(&mut known, doc(200, "nats", 2));
        assert_eq!(scaled.parsed, vec![1], "globex's inFlight is divided by 2 now");
        assert_eq!(scaled.tenants[1].limits.in_flight, Some(5));
        assert_eq!(second.tenants[1].limits.in_flight, Some(3));
        // A refused configuration leaves what is known alone.
        assert!(Config::parse_reusing(b"{not json", &mut known).is_err());
        assert_eq!(parse(&mut known, doc(200, "nats", 2)).parsed, Vec::<TenantId>::new());
    }
}
