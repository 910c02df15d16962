//! Envoy metrics by name, defined once per VM and cached by id. Per-connection code keeps the
//! ids of its tenant's metrics, so counting a message is one host call and no allocation.

use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;
use std::cell::RefCell;
use std::collections::HashMap;
use weighstation_core::config::Protocol;
use weighstation_core::metrics::{generation_metric_name, tenant_metric_name, TenantMetric};

thread_local! {
    static IDS: RefCell<HashMap<String, u32>> = RefCell::new(HashMap::new());
}

fn id(name: String, kind: MetricType) -> Option<u32> {
    if let Some(id) = IDS.with(|m| m.borrow().get(&name).copied()) {
        return Some(id);
    }
    match hostcalls::define_metric(kind, &name) {
        Ok(id) => {
            IDS.with(|m| m.borrow_mut().insert(name, id));
            Some(id)
        }
        Err(e) => {
            log::warn!("weighstation: cannot define metric {name}: {e:?}");
            None
        }
    }
}

/// The ids of one tenant's per-protocol metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct TenantMetrics {
    messages: Option<u32>,
    bytes: Option<u32>,
    connections: Option<u32>,
}

impl TenantMetrics {
    pub fn for_tenant(protocol: Protocol, tenant: &str) -> Self {
        let m = |metric: TenantMetric| {
            let kind = if metric.is_gauge() {
                MetricType::Gauge
            } else {
                MetricType::Counter
            };
            id(tenant_metric_name(metric, protocol, tenant), kind)
        };
        TenantMetrics {
            messages: m(TenantMetric::MessagesAccepted),
            bytes: m(TenantMetric::BytesAccepted),
            connections: m(TenantMetric::ConnectionsActive),
        }
    }

    pub fn accepted(&self, messages: u64, bytes: u64) {
        add(self.messages, messages);
        add(self.bytes, bytes);
    }

    pub fn connection_opened(&self) {
        gauge_add(self.connections, 1);
    }

    pub fn connection_closed(&self) {
        gauge_add(self.connections, -1);
    }
}

fn add(id: Option<u32>, n: u64) {
    if let (Some(id), Ok(n @ 1..)) = (id, i64::try_from(n)) {
        let _ = hostcalls::increment_metric(id, n);
    }
}

fn gauge_add(id: Option<u32>, n: i64) {
    if let Some(id) = id {
        let _ = hostcalls::increment_metric(id, n);
    }
}

fn gauge_set(id: Option<u32>, v: u64) {
    if let Some(id) = id {
        let _ = hostcalls::record_metric(id, v);
    }
}

/// Publishes a newly installed configuration: its generation and each tenant's size limit.
/// Every worker's VM sets the same values, so the last writer is as good as any.
pub fn configuration_installed(config: &weighstation_core::config::Config) {
    gauge_set(
        id(generation_metric_name(config.protocol), MetricType::Gauge),
        config.generation,
    );
    for t in &config.tenants {
        let name = tenant_metric_name(TenantMetric::LimitMaxMessageBytes, config.protocol, &t.name);
        gauge_set(id(name, MetricType::Gauge), t.limits.max_message_bytes.unwrap_or(0));
    }
}
