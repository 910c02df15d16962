//! Limits within a tenant: each client of a tenant in a bucket of its own, so that one runaway
//! service cannot take its whole tenant's budget. A client is what its protocol names (Kafka:
//! the request header's client.id, with the connection's principal; NATS: the CONNECT name,
//! else its user or nkey). Named clients have their own buckets; every other client takes a
//! slot of a fixed pool per tenant (pool.rs), since shared-data keys are never deleted.

pub mod pool;

use serde::Deserialize;

use crate::consume::ConsumeLimit;
use crate::limits::{Limits, RateLimit};
use crate::protocol::Protocol;

/// A tenant's client limits as the control plane compiles them (control-plane/internal/compile
/// Clients).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Clients {
    #[serde(default)]
    pub default: Option<Limits>,
    #[serde(default)]
    pub named: Vec<NamedClients>,
    pub pool: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NamedClients {
    /// Exact names, or prefixes ending in `*`.
    pub names: Vec<String>,
    pub limits: Limits,
}

/// What the data path needs of a tenant's client limits, computed once per configuration.
#[derive(Debug)]
pub struct ClientsPlan {
    pub named: Vec<NamedPlan>,
    /// Every other client's limits.
    pub default: Option<BucketPlan>,
    pub pool: u32,
}

/// One client bucket's limits with their write side's and read side's buckets.
#[derive(Debug)]
pub struct BucketPlan {
    pub limits: Limits,
    pub rate: RateLimit,
    pub consume: Option<ConsumeLimit>,
    pub consume_messages: Option<ConsumeLimit>,
}

impl BucketPlan {
    fn new(protocol: Protocol, limits: &Limits) -> BucketPlan {
        BucketPlan {
            rate: limits.rate(),
            consume: ConsumeLimit::bytes_of(limits),
            consume_messages: ConsumeLimit::messages_of(protocol, limits),
            limits: limits.clone(),
        }
    }

    /// Whether it limits what its client's consumers receive.
    pub fn limits_reads(&self) -> bool {
        self.consume.is_some() || self.consume_messages.is_some()
    }

    /// Identifies its buckets' parameters, to key their state: a change starts them afresh.
    pub fn fingerprint(&self) -> u64 {
        [self.consume, self.consume_messages]
            .iter()
            .map(|c| c.map_or(0, |c| c.fingerprint()))
            .fold(self.rate.fingerprint(), |h, c| (h ^ c).wrapping_mul(0x0100_0000_01b3))
    }
}

#[derive(Debug)]
pub struct NamedPlan {
    names: Vec<String>,
    pub plan: BucketPlan,
    /// Identifies the entry's names and limits, to key its buckets.
    pub fingerprint: u64,
}

fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

impl NamedPlan {
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

impl ClientsPlan {
    pub fn new(protocol: Protocol, c: &Clients) -> ClientsPlan {
        let named = c
            .named
            .iter()
            .map(|n| {
                let plan = BucketPlan::new(protocol, &n.limits);
                let fingerprint = n
                    .names
                    .iter()
                    .fold(plan.fingerprint(), |h, name| fnv(h, name.as_bytes()) ^ 0xff);
                NamedPlan {
                    names: n.names.clone(),
                    plan,
                    fingerprint,
                }
            })
            .collect();
        ClientsPlan {
            named,
            default: c.default.as_ref().map(|l| BucketPlan::new(protocol, l)),
            pool: c.pool.max(1),
        }
    }

    /// Whether any of its buckets limits what clients' consumers receive.
    pub fn limits_reads(&self) -> bool {
        self.default
            .iter()
            .chain(self.named.iter().map(|n| &n.plan))
            .any(BucketPlan::limits_reads)
    }

    /// The first named entry that names the client: exactly, or by a prefix ending in `*`.
    pub fn named_for(&self, client: &[u8]) -> Option<usize> {
        self.named.iter().position(|n| {
            n.names.iter().any(|name| match name.strip_suffix('*') {
                Some(prefix) => client.starts_with(prefix.as_bytes()),
                None => client == name.as_bytes(),
            })
        })
    }
}

/// Identifies a client within its tenant: its name, and who authenticated the connection (two
/// principals of one tenant using one client.id are two clients, as in Kafka's (user,
/// client-id) quotas). Never 0, which marks a pool slot no client owns.
pub fn client_hash(principal: Option<&[u8]>, name: &[u8]) -> u64 {
    let h = fnv(0xcbf2_9ce4_8422_2325, principal.unwrap_or_default());
    fnv(fnv(h, &[0]), name).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(json: &str) -> ClientsPlan {
        ClientsPlan::new(Protocol::Nats, &serde_json::from_str(json).unwrap())
    }

    #[test]
    fn the_first_entry_that_names_a_client_wins() {
        let p = plan(
            r#"{"named":[{"names":["billing-a"],"limits":{"messagesPerSecond":5}},
                         {"names":["billing-*","batch"],"limits":{"messagesPerSecond":9}}],"pool":10}"#,
        );
        assert_eq!(p.named_for(b"billing-a"), Some(0));
        assert_eq!(p.named_for(b"billing-b"), Some(1), "by prefix");
        assert_eq!(p.named_for(b"batch"), Some(1));
        assert_eq!(p.named_for(b"batch-2"), None, "an exact name is not a prefix");
        assert_eq!(p.named_for(b"billing"), None);
        assert_eq!(p.named_for(b""), None);
        assert!(p.default.is_none());
    }

    #[test]
    fn a_burst_left_out_is_one_second_of_the_rate() {
        let p = plan(r#"{"default":{"messagesPerSecond":50,"bytesPerSecond":1000,"burstBytes":4000},"pool":3}"#);
        let default = p.default.unwrap();
        assert_eq!(default.rate, RateLimit::new(Some((50, 50)), Some((1000, 4000))));
        assert_eq!(p.pool, 3);
    }

    #[test]
    fn a_named_entry_changed_is_a_new_bucket() {
        let a = plan(r#"{"named":[{"names":["x"],"limits":{"messagesPerSecond":5}}],"pool":1}"#);
        let b = plan(r#"{"named":[{"names":["x"],"limits":{"messagesPerSecond":6}}],"pool":1}"#);
        let c = plan(r#"{"named":[{"names":["y"],"limits":{"messagesPerSecond":5}}],"pool":1}"#);
        let same = plan(r#"{"named":[{"names":["x"],"limits":{"messagesPerSecond":5}}],"pool":9}"#);
        assert_ne!(a.named[0].fingerprint, b.named[0].fingerprint);
        assert_ne!(a.named[0].fingerprint, c.named[0].fingerprint);
        assert_eq!(a.named[0].fingerprint, same.named[0].fingerprint);
    }

    #[test]
    fn a_client_may_limit_what_its_consumers_receive() {
        let json = r#"{"default":{"consumeBytesPerSecond":1000,"consumeMessagesPerSecond":10},
                       "named":[{"names":["x"],"limits":{"messagesPerSecond":5}}],"pool":1}"#;
        let nats = plan(json);
        let default = nats.default.as_ref().unwrap();
        assert_eq!(
            default.consume.map(|c| c.burst()),
            Some(1000),
            "a burst left out is one second"
        );
        assert!(default.consume_messages.is_some());
        assert!(nats.limits_reads());
        assert!(!nats.named[0].plan.limits_reads());
        let kafka = ClientsPlan::new(Protocol::Kafka, &serde_json::from_str(json).unwrap());
        assert!(
            kafka.default.unwrap().consume_messages.is_none(),
            "Kafka consumers are limited by bytes"
        );
        let writes_only = plan(r#"{"default":{"messagesPerSecond":5},"pool":1}"#);
        assert!(!writes_only.limits_reads());
        let a = plan(r#"{"named":[{"names":["x"],"limits":{"consumeBytesPerSecond":5}}],"pool":1}"#);
        let b = plan(r#"{"named":[{"names":["x"],"limits":{"consumeBytesPerSecond":6}}],"pool":1}"#);
        assert_ne!(
            a.named[0].fingerprint, b.named[0].fingerprint,
            "a new consume limit is a new bucket"
        );
    }

    #[test]
    fn a_client_is_its_name_and_its_principal() {
        assert_ne!(client_hash(None, b"a"), client_hash(None, b"b"));
        assert_ne!(client_hash(Some(b"alice"), b"a"), client_hash(Some(b"bob"), b"a"));
        assert_ne!(
            client_hash(Some(b"a"), b""),
            client_hash(None, b"a"),
            "the parts are separated"
        );
        assert_eq!(client_hash(None, b"a"), client_hash(None, b"a"));
        assert_ne!(client_hash(None, b""), 0);
    }
}
