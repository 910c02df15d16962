//! Names of the filter's metrics. Envoy puts them under `wasmcustom.` and the bootstrap's
//! stats_tags (control-plane/internal/bootstrap) turn each `.key.value` part into a label, so
//! `weighstation_messages_accepted.protocol.nats.tenant.acme` is exposed to Prometheus as
//! `weighstation_messages_accepted{protocol="nats",tenant="acme"}`.

use crate::config::Protocol;

/// Per-tenant counters and gauges the filter keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TenantMetric {
    MessagesAccepted,
    BytesAccepted,
    ConnectionsActive,
    LimitMaxMessageBytes,
}

impl TenantMetric {
    pub fn name(self) -> &'static str {
        match self {
            TenantMetric::MessagesAccepted => "weighstation_messages_accepted",
            TenantMetric::BytesAccepted => "weighstation_bytes_accepted",
            TenantMetric::ConnectionsActive => "weighstation_connections_active",
            TenantMetric::LimitMaxMessageBytes => "weighstation_limit_max_message_bytes",
        }
    }

    pub fn is_gauge(self) -> bool {
        matches!(
            self,
            TenantMetric::ConnectionsActive | TenantMetric::LimitMaxMessageBytes
        )
    }
}

/// The full Envoy stat name of a per-tenant metric.
pub fn tenant_metric_name(metric: TenantMetric, protocol: Protocol, tenant: &str) -> String {
    format!("{}.protocol.{}.tenant.{}", metric.name(), protocol.as_str(), tenant)
}

/// The stat name of the policy generation a protocol's filter has in force.
pub fn generation_metric_name(protocol: Protocol) -> String {
    format!("weighstation_policy_generation.protocol.{}", protocol.as_str())
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
            generation_metric_name(Protocol::Kafka),
            "weighstation_policy_generation.protocol.kafka"
        );
    }
}
