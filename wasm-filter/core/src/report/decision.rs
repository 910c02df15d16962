//! One decision as an operator reads it: who, on what, which limit with its configured value and
//! what was observed, and what the client was told. Never a payload or a credential: the client
//! is named by the identity attribution used (user, nkey, SASL principal, certificate subject or
//! client.id), never by a password or token.

use serde::Serialize;

use crate::config::Limits;
use crate::limits::Reason;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// The worker's decision number, from 1: the control plane keeps a decision once even if a
    /// report carrying it is sent again.
    pub worker_seq: u64,
    pub at_ms: u64,
    pub protocol: &'static str,
    pub tenant: String,
    /// The LimitPolicy's metadata.name and the policy version in force.
    pub policy: String,
    pub version: String,
    /// The NATS subject or the (first) Kafka topic.
    pub subject: String,
    pub peer: String,
    pub client: String,
    /// The policy field that decided: maxMessageBytes, rate, inFlight, queue, connections,
    /// consume.
    pub limit: &'static str,
    pub configured: String,
    pub observed: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The text the client received (or would read in the broker's log).
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "camelCase")]
pub enum Outcome {
    /// `code`: what the client saw (a NATS -ERR, a close, a Kafka error code).
    #[serde(rename_all = "camelCase")]
    Refused { code: String, retry_after_ms: u32 },
    #[serde(rename_all = "camelCase")]
    Delayed { delayed_ms: u64 },
}

/// The configured read-side limit (limits.consume) a consumer was throttled by: the override's
/// where it matched one that sets it, else the tenant's.
pub fn consume_configured(tenant: &Limits, over: Option<&Limits>) -> String {
    let l = over
        .filter(|o| o.consume_bytes_per_second.is_some() || o.consume_messages_per_second.is_some())
        .unwrap_or(tenant);
    let mut parts = Vec::new();
    if let Some(rate) = l.consume_bytes_per_second {
        parts.push(format!(
            "{rate} bytes/s received (burst {})",
            l.consume_burst_bytes.unwrap_or(rate)
        ));
    }
    if let Some(rate) = l.consume_messages_per_second {
        parts.push(format!("{rate} messages/s received"));
    }
    if parts.is_empty() {
        return "unlimited".to_owned();
    }
    parts.join(", ")
}

/// The policy field behind a reason.
pub fn limit_name(reason: Reason) -> &'static str {
    match reason {
        Reason::Size => "maxMessageBytes",
        Reason::Rate => "rate",
        Reason::InFlight => "inFlight",
        Reason::Queue => "queue",
        Reason::Connections => "connections",
        Reason::Permission => "permissions",
    }
}

/// The configured value of the limit behind `reason`: the override's where the message matched
/// one that sets it (it is checked first), else the tenant's.
pub fn configured(reason: Reason, tenant: &Limits, over: Option<&Limits>) -> String {
    let pick = |f: fn(&Limits) -> Option<u64>| over.and_then(f).or_else(|| f(tenant));
    let n = |v: Option<u64>| v.map_or_else(|| "unlimited".to_owned(), |v| v.to_string());
    match reason {
        Reason::Size => format!("{} bytes", n(pick(|l| l.max_message_bytes))),
        Reason::Rate => {
            let from = over.filter(|o| o.messages_per_second.is_some() || o.bytes_per_second.is_some());
            let l = from.unwrap_or(tenant);
            let mut parts = Vec::new();
            if let Some(m) = l.messages_per_second {
                parts.push(format!("{m} messages/s (burst {})", l.burst_messages.unwrap_or(m)));
            }
            if let Some(b) = l.bytes_per_second {
                parts.push(format!("{b} bytes/s (burst {})", l.burst_bytes.unwrap_or(b)));
            }
            parts.join(", ")
        }
        Reason::InFlight => format!("{} awaiting a reply", n(pick(|l| l.in_flight))),
        Reason::Queue => format!(
            "{} held, maxWait {} ms",
            n(tenant.queue_max_messages),
            n(tenant.queue_max_wait_ms)
        ),
        Reason::Connections => format!("{} connections", n(tenant.connections)),
        Reason::Permission => "not granted".to_owned(),
    }
}

/// What the limit saw: the message's size, when the rate would admit it, or the state of the
/// in-flight slots or the queue.
pub fn observed(reason: Reason, bytes: u64, retry_after_ms: u32, detail: &str) -> String {
    match reason {
        Reason::Size => format!("{bytes} bytes"),
        Reason::Rate => format!("admissible in {retry_after_ms} ms"),
        Reason::InFlight => "every slot awaiting a reply".to_owned(),
        Reason::Queue if detail.contains("maxWait") => "not admitted within maxWait".to_owned(),
        Reason::Queue => "queue full".to_owned(),
        Reason::Connections => "every connection taken".to_owned(),
        Reason::Permission => detail.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_names_the_override_that_decided() {
        let tenant = Limits {
            messages_per_second: Some(100),
            max_message_bytes: Some(1024),
            in_flight: Some(10),
            ..Limits::default()
        };
        let over = Limits {
            messages_per_second: Some(5),
            burst_messages: Some(2),
            ..Limits::default()
        };
        assert_eq!(configured(Reason::Rate, &tenant, None), "100 messages/s (burst 100)");
        assert_eq!(configured(Reason::Rate, &tenant, Some(&over)), "5 messages/s (burst 2)");
        assert_eq!(configured(Reason::Size, &tenant, Some(&over)), "1024 bytes");
        assert_eq!(configured(Reason::InFlight, &tenant, None), "10 awaiting a reply");
        assert_eq!(configured(Reason::Connections, &tenant, None), "unlimited connections");
    }

    #[test]
    fn an_event_is_flat_json() {
        let d = Decision {
            worker_seq: 1,
            at_ms: 1,
            protocol: "nats",
            tenant: "acme".into(),
            policy: "acme".into(),
            version: "3-abc".into(),
            subject: "orders.new".into(),
            peer: "10.0.0.1:5555".into(),
            client: "user acme".into(),
            limit: "rate",
            configured: "5 messages/s (burst 5)".into(),
            observed: "admissible in 200 ms".into(),
            outcome: Outcome::Refused {
                code: "-ERR Permissions Violation".into(),
                retry_after_ms: 200,
            },
            detail: "rate limit of tenant acme: 5 messages/s".into(),
        };
        let json = String::from_utf8(serde_json::to_vec(&d).unwrap_or_default()).unwrap_or_default();
        assert!(
            json.contains(r#""decision":"refused","code":"-ERR Permissions Violation","retryAfterMs":200"#),
            "{json}"
        );
        assert!(json.contains(r#""atMs":1"#), "{json}");
    }
}
