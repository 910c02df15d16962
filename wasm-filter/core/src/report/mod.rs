//! What a worker tells the control plane about its traffic (docs/operations.md): its tenants'
//! usage and a sample of its decisions, posted about once a second from the ticking root
//! context. Counting a message is an array add ([`Tally`]); a decision becomes an event only if
//! the [`Sampler`] keeps it, so the data path never formats or allocates for a refusal beyond
//! the first few per second of each tenant and reason. The body is JSON, built off the data
//! path; the control plane reads it in control-plane/internal/usage.

mod clients;
mod decision;
mod sampler;
mod tally;

pub use clients::TopClients;
pub use decision::{configured, consume_configured, limit_name, observed, Decision, Outcome};
pub use sampler::{Kind, Sampler, Suppressed};
pub use tally::{SubjectCount, Tally, TenantUsage, TopSubjects};

use serde::{Deserialize, Serialize};

/// Where reports go and how decisions are sampled, as the control plane configures it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reports {
    /// The Envoy cluster the control plane made for itself.
    pub cluster: String,
    /// The control plane's host:port, for the request's :authority.
    pub authority: String,
    /// Decisions kept per tenant and reason each second; the rest are counted.
    pub decisions_per_second: u32,
    /// A message held at least this long is a decision (0: none is).
    pub delay_threshold_ms: u64,
}

/// The path workers post their reports to.
pub const REPORT_PATH: &str = "/v1/report";

/// How often a worker reports.
pub const REPORT_PERIOD_NS: u64 = 1_000_000_000;

/// One worker's report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report<'a> {
    /// The Envoy node id.
    pub replica: &'a str,
    /// Tells this worker's VM apart from the node's others (and from its predecessor after a
    /// restart, whose counters started again from zero).
    pub worker: u64,
    /// The worker's report number, from 1: the first counts whole (the worker's counters
    /// started with it); a number already seen is a report sent again.
    pub seq: u64,
    /// Unix time of the report, ms.
    pub at_ms: u64,
    /// Counters since the worker started and gauges now, per protocol and tenant.
    pub tenants: &'a [TenantUsage],
    pub decisions: &'a [Decision],
    pub suppressed: &'a [Suppressed],
    /// Decisions this worker dropped since it started because reports did not get through.
    pub dropped: u64,
    /// Every Kafka broker this worker has seen named in a response of a discovered cluster, in
    /// every report: a control plane that restarted learns them all again within a second.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub brokers: &'a [SeenBroker],
    /// The counters of the last report a control plane counted, sent when the control plane
    /// answering asked for them (it had no report of this worker before: it restarted, or the
    /// worker's reports went elsewhere), so that it counts what the worker did since then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Since<'a>>,
}

/// Counters as of an earlier report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Since<'a> {
    pub at_ms: u64,
    pub tenants: &'a [TenantUsage],
}

/// A control plane's answer to a report whose counters it could not count: it has no earlier
/// report of the worker to count them from. The worker sends its last counted report's counters
/// with the next (`Report::since`).
pub const ANSWER_SEND_SINCE: &str = "205";

/// A broker a response named: node id and address as the broker advertises itself, on the
/// listeners of one discovered cluster (by filter chain), and when it was last seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeenBroker {
    pub chain: String,
    pub node: i32,
    pub host: String,
    pub port: i32,
    pub seen_ms: u64,
}

impl Report<'_> {
    pub fn to_json(&self) -> Vec<u8> {
        // Strings and integers only: serialising cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}
