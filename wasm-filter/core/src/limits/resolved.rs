//! A tenant's, an override's or a client's limits as the control plane resolves them
//! (control-plane/internal/compile Limits).

use serde::Deserialize;

use super::RateLimit;

/// Resolved limits; `None` is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub max_message_bytes: Option<u64>,
    pub messages_per_second: Option<u64>,
    pub bytes_per_second: Option<u64>,
    pub burst_messages: Option<u64>,
    pub burst_bytes: Option<u64>,
    pub in_flight: Option<u64>,
    pub queue_max_messages: Option<u64>,
    pub queue_max_wait_ms: Option<u64>,
    pub connections: Option<u64>,
    pub consume_bytes_per_second: Option<u64>,
    pub consume_burst_bytes: Option<u64>,
    pub consume_messages_per_second: Option<u64>,
}

impl Limits {
    /// The rate buckets; a burst left out is one second of its rate. The control plane resolves
    /// every default burst (a client's or override's is capped at a quarter of its tenant's:
    /// control-plane/internal/policy/bursts.go) and sends it; only a tenant's burst written
    /// `unlimited` arrives absent.
    pub fn rate(&self) -> RateLimit {
        RateLimit::new(
            self.messages_per_second.map(|r| (r, self.burst_messages.unwrap_or(r))),
            self.bytes_per_second.map(|r| (r, self.burst_bytes.unwrap_or(r))),
        )
    }
}
