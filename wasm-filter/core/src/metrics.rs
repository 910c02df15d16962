//! Names of the filter's metrics. Envoy puts them under `wasmcustom.` and the bootstrap's
//! stats_tags (control-plane/internal/bootstrap) turn each `.key.value` part into a label, so
//! `weighstation_messages_accepted.protocol.nats.tenant.acme` is exposed to Prometheus as
//! `weighstation_messages_accepted{protocol="nats",tenant="acme"}`.

use crate::limits::Reason;
use crate::protocol::Protocol;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Per-tenant metrics (contract §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TenantMetric {
    MessagesAccepted,
    BytesAccepted,
    /// Messages admitted after being held (onLimit: delay).
    MessagesDelayed,
    ConnectionsActive,
    InFlight,
    QueueDepth,
    /// Time a delayed message was held, in milliseconds.
    DelayMs,
    LimitMaxMessageBytes,
    /// The read side: record bytes delivered to the tenant's consumers.
    BytesConsumed,
    /// Fetches (responses throttled or requests held) because the consume bucket was in debt.
    ConsumeThrottled,
    /// Milliseconds fetches were held, summed.
    ConsumeHeldMs,
    /// dryRun: fetches that would have been throttled.
    ConsumeWouldThrottle,
    /// NATS connections ended as slow consumers: a core delivery outran the consume limit.
    SlowConsumers,
}

impl TenantMetric {
    pub fn name(self) -> &'static str {
        match self {
            TenantMetric::MessagesAccepted => "weighstation_messages_accepted",
            TenantMetric::BytesAccepted => "weighstation_bytes_accepted",
            TenantMetric::MessagesDelayed => "weighstation_messages_delayed",
            TenantMetric::ConnectionsActive => "weighstation_connections_active",
            TenantMetric::InFlight => "weighstation_in_flight",
            TenantMetric::QueueDepth => "weighstation_queue_depth",
            TenantMetric::DelayMs => "weighstation_delay_ms",
            TenantMetric::LimitMaxMessageBytes => "weighstation_limit_max_message_bytes",
            TenantMetric::BytesConsumed => "weighstation_bytes_consumed",
            TenantMetric::ConsumeThrottled => "weighstation_consume_throttled",
            TenantMetric::ConsumeHeldMs => "weighstation_consume_held_ms",
            TenantMetric::ConsumeWouldThrottle => "weighstation_dryrun_consume_would_throttle",
            TenantMetric::SlowConsumers => "weighstation_consume_slow_consumers",
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            TenantMetric::MessagesAccepted
            | TenantMetric::BytesAccepted
            | TenantMetric::MessagesDelayed
            | TenantMetric::BytesConsumed
            | TenantMetric::ConsumeThrottled
            | TenantMetric::ConsumeHeldMs
            | TenantMetric::ConsumeWouldThrottle
            | TenantMetric::SlowConsumers => Kind::Counter,
            TenantMetric::DelayMs => Kind::Histogram,
            _ => Kind::Gauge,
        }
    }
}

/// Per-tenant, per-reason counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasonMetric {
    Refused,
    /// dryRun: what enforce would have refused.
    WouldRefuse,
}

impl ReasonMetric {
    pub fn name(self) -> &'static str {
        match self {
            ReasonMetric::Refused => "weighstation_messages_refused",
            ReasonMetric::WouldRefuse => "weighstation_dryrun_would_refuse",
        }
    }
}

/// The full Envoy stat name of a per-tenant metric.
pub fn tenant_metric_name(metric: TenantMetric, protocol: Protocol, tenant: &str) -> String {
    format!("{}.protocol.{}.tenant.{}", metric.name(), protocol.as_str(), tenant)
}

pub fn reason_metric_name(metric: ReasonMetric, protocol: Protocol, reason: Reason, tenant: &str) -> String {
    format!(
        "{}.protocol.{}.reason.{}.tenant.{}",
        metric.name(),
        protocol.as_str(),
        reason.as_str(),
        tenant
    )
}

/// Why the gateway closed a client connection itself, for `weighstation_connections_closed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// It took nothing the gateway owed it for the slow-consumer deadline (crate::backlog).
    SlowConsumer,
}

impl CloseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::SlowConsumer => "slow_consumer",
        }
    }
}

/// Connections the gateway closed, by protocol, reason and tenant.
pub fn connections_closed_metric_name(protocol: Protocol, reason: CloseReason, tenant: &str) -> String {
    format!(
        "weighstation_connections_closed.protocol.{}.reason.{}.tenant.{}",
        protocol.as_str(),
        reason.as_str(),
        tenant
    )
}

/// The stat name of the policy generation a protocol's filter has in force.
pub fn generation_metric_name(protocol: Protocol) -> String {
    format!("weighstation_policy_generation.protocol.{}", protocol.as_str())
}

/// Shared-data keys in this Envoy process: limiter state is never deleted, so the count grows
/// with each tenant and each distinct rate limit configured since the process started.
pub const SHARED_DATA_KEYS_METRIC: &str = "weighstation_shared_data_keys";

/// NATS connections ended because the server's INFO could not be rewritten (it is never
/// forwarded as the server sent it: crate::nats::info).
pub const UNREADABLE_INFO_METRIC: &str = "weighstation_nats_unreadable_info_total";

/// Connections whose credentials the broker refused: charged to no tenant, so counted apart.
pub fn auth_failures_metric_name(protocol: Protocol) -> String {
    format!("weighstation_auth_failures_total.protocol.{}", protocol.as_str())
}

/// Polls of the tenant feed a protocol's filter made: while nothing changes, one per worker
/// every 20 s (the feed holds a poll that long); more says a worker is answered at once again
/// and again.
pub fn tenant_feed_polls_metric_name(protocol: Protocol) -> String {
    format!("weighstation_tenant_feed_polls_total.protocol.{}", protocol.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_bootstrap_tag_regexes() {
        assert_eq!(
            tenant_metric_name(TenantMetric::MessagesAccepted, Protocol::Nats, "acme"),
            "weighstation_messages_accepted.protocol.nats.tenant.acme"
        );
        assert_eq!(
            reason_metric_name(ReasonMetric::Refused, Protocol::Kafka, Reason::InFlight, "acme"),
            "weighstation_messages_refused.protocol.kafka.reason.inflight.tenant.acme"
        );
        assert_eq!(
            connections_closed_metric_name(Protocol::Nats, CloseReason::SlowConsumer, "acme"),
            "weighstation_connections_closed.protocol.nats.reason.slow_consumer.tenant.acme"
        );
        assert_eq!(
            generation_metric_name(Protocol::Kafka),
            "weighstation_policy_generation.protocol.kafka"
        );
    }
}
