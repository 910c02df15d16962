//! Envoy metrics by name, defined once per VM and cached by id. A connection keeps the ids of
//! its tenant's metrics. Counter and gauge changes are summed in the VM and handed to Envoy at
//! the end of each callback ([`flush`]), so counting a message is no host call and no
//! allocation, and a read of many messages costs one host call per metric it touched.

use crate::reports;
use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;
use std::cell::RefCell;
use std::collections::HashMap;
use weighstation_core::config::{Config, Protocol};
use weighstation_core::limits::Reason;
use weighstation_core::metrics::{
    generation_metric_name, reason_metric_name, tenant_metric_name, Kind, ReasonMetric, TenantMetric,
    SHARED_DATA_KEYS_METRIC,
};

thread_local! {
    static IDS: RefCell<HashMap<String, u32>> = RefCell::new(HashMap::new());
    /// Changes not yet handed to Envoy, by metric id.
    static PENDING: RefCell<Vec<(u32, i64)>> = const { RefCell::new(Vec::new()) };
}

/// How many of the latest pending changes a new one is summed into; a callback touches a few
/// metrics of one tenant, so a short look back finds them.
const MERGE_WINDOW: usize = 8;

fn pend(id: u32, n: i64) {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let start = p.len().saturating_sub(MERGE_WINDOW);
        match p[start..].iter_mut().find(|(i, _)| *i == id) {
            Some((_, sum)) => *sum = sum.saturating_add(n),
            None => p.push((id, n)),
        }
    });
}

/// Hands the summed changes to Envoy. Called at the end of every callback that can count.
pub fn flush() {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        for (id, n) in p.drain(..) {
            if n != 0 {
                let _ = hostcalls::increment_metric(id, n);
            }
        }
    });
}

fn id(name: String, kind: Kind) -> Option<u32> {
    if let Some(id) = IDS.with(|m| m.borrow().get(&name).copied()) {
        return Some(id);
    }
    let t = match kind {
        Kind::Counter => MetricType::Counter,
        Kind::Gauge => MetricType::Gauge,
        Kind::Histogram => MetricType::Histogram,
    };
    match hostcalls::define_metric(t, &name) {
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
    delayed: Option<u32>,
    connections: Option<u32>,
    in_flight: Option<u32>,
    queue_depth: Option<u32>,
    delay_ms: Option<u32>,
    refused: [Option<u32>; 6],
    would_refuse: [Option<u32>; 6],
    consumed: Option<u32>,
    consume_throttled: Option<u32>,
    consume_held_ms: Option<u32>,
    consume_would_throttle: Option<u32>,
    slow_consumers: Option<u32>,
    /// The tenant's slot in this worker's usage report (crate::reports).
    usage: usize,
}

impl TenantMetrics {
    pub fn for_tenant(protocol: Protocol, tenant: &str) -> Self {
        let m = |metric: TenantMetric| id(tenant_metric_name(metric, protocol, tenant), metric.kind());
        let r = |metric: ReasonMetric| {
            Reason::ALL.map(|reason| id(reason_metric_name(metric, protocol, reason, tenant), Kind::Counter))
        };
        TenantMetrics {
            messages: m(TenantMetric::MessagesAccepted),
            bytes: m(TenantMetric::BytesAccepted),
            delayed: m(TenantMetric::MessagesDelayed),
            connections: m(TenantMetric::ConnectionsActive),
            in_flight: m(TenantMetric::InFlight),
            queue_depth: m(TenantMetric::QueueDepth),
            delay_ms: m(TenantMetric::DelayMs),
            refused: r(ReasonMetric::Refused),
            would_refuse: r(ReasonMetric::WouldRefuse),
            consumed: m(TenantMetric::BytesConsumed),
            consume_throttled: m(TenantMetric::ConsumeThrottled),
            consume_held_ms: m(TenantMetric::ConsumeHeldMs),
            consume_would_throttle: m(TenantMetric::ConsumeWouldThrottle),
            slow_consumers: m(TenantMetric::SlowConsumers),
            usage: reports::slot(protocol, tenant),
        }
    }

    /// The tenant's slot in this worker's usage report.
    pub fn usage_slot(&self) -> usize {
        self.usage
    }

    pub fn accepted(&self, messages: u64, bytes: u64) {
        add(self.messages, messages);
        add(self.bytes, bytes);
        reports::count(self.usage, |u| {
            u.messages += messages;
            u.bytes += bytes;
        });
    }

    pub fn delayed(&self, held_ns: u64) {
        add(self.delayed, 1);
        if let Some(id) = self.delay_ms {
            let _ = hostcalls::record_metric(id, held_ns / 1_000_000);
        }
        reports::count(self.usage, |u| {
            u.delayed += 1;
            u.delayed_ms += held_ns / 1_000_000;
        });
    }

    pub fn refused(&self, reason: Reason, n: u64) {
        add(self.refused.get(reason.index()).copied().flatten(), n);
        reports::count(self.usage, |u| u.refused(reason, n));
    }

    pub fn would_refuse(&self, reason: Reason, n: u64) {
        add(self.would_refuse.get(reason.index()).copied().flatten(), n);
        reports::count(self.usage, |u| u.would_refuse(reason, n));
    }

    /// Record bytes a consumer of the tenant received.
    pub fn consumed(&self, bytes: u64) {
        add(self.consumed, bytes);
        reports::count(self.usage, |u| u.consumed += bytes);
    }

    /// A fetch throttled (its response's throttle_time_ms raised) or held (`held_ms`).
    pub fn consume_throttled(&self, held_ms: u64) {
        add(self.consume_throttled, 1);
        add(self.consume_held_ms, held_ms);
        reports::count(self.usage, |u| u.consume_throttled += 1);
    }

    /// dryRun: a fetch or pull that would have been throttled, or a NATS subscriber that would
    /// have been ended as a slow consumer.
    pub fn consume_would_throttle(&self) {
        add(self.consume_would_throttle, 1);
    }

    /// A NATS connection ended as a slow consumer.
    pub fn slow_consumer(&self) {
        add(self.slow_consumers, 1);
    }

    pub fn connections(&self, delta: i64) {
        gauge_add(self.connections, delta);
        reports::count(self.usage, |u| u.connections += delta);
    }

    pub fn in_flight(&self, delta: i64) {
        gauge_add(self.in_flight, delta);
        reports::count(self.usage, |u| u.in_flight += delta);
    }

    /// A request's in-flight slot is about to go back: the gauge drops now, not at the end of
    /// the callback, so that no other worker can take the freed slot and show its +1 first —
    /// the sum would read one over the limit.
    pub fn in_flight_released(&self) {
        if let Some(id) = self.in_flight {
            let _ = hostcalls::increment_metric(id, -1);
        }
        reports::count(self.usage, |u| u.in_flight -= 1);
    }

    pub fn queue_depth(&self, delta: i64) {
        gauge_add(self.queue_depth, delta);
        reports::count(self.usage, |u| u.held += delta);
    }
}

fn add(id: Option<u32>, n: u64) {
    if let (Some(id), Ok(n @ 1..)) = (id, i64::try_from(n)) {
        pend(id, n);
    }
}

/// Gauges count up and down from every worker, so each VM adds its own changes.
fn gauge_add(id: Option<u32>, n: i64) {
    if let Some(id) = id {
        pend(id, n);
    }
}

/// Adds to a counter by name (rare events: the name is formatted by the caller).
pub fn count(name: &str, n: u64) {
    add(id(name.to_owned(), Kind::Counter), n);
}

/// Counts a shared-data key the first time any worker stores it: the set that created it is
/// the one compare-and-swap that succeeded on an absent key, so each key is counted once.
pub fn shared_data_key_created() {
    gauge_add(id(SHARED_DATA_KEYS_METRIC.to_owned(), Kind::Gauge), 1);
}

/// Sets a process-wide gauge by name (the quota leader's figures: one writer at a time).
pub fn set_gauge(name: Option<&str>, v: u64) {
    if let Some(name) = name {
        gauge_set(id(name.to_owned(), Kind::Gauge), v);
    }
}

fn gauge_set(id: Option<u32>, v: u64) {
    if let Some(id) = id {
        let _ = hostcalls::record_metric(id, v);
    }
}

/// Publishes a newly installed configuration: its generation and the size limit of each tenant
/// new or changed in it (the others' gauges hold already). Every worker's VM sets the same
/// values, so the last writer is as good as any.
pub fn configuration_installed(config: &Config) {
    gauge_set(
        id(generation_metric_name(config.protocol), Kind::Gauge),
        config.generation,
    );
    for t in config.parsed.iter().filter_map(|&id| config.tenant(id)) {
        let name = tenant_metric_name(TenantMetric::LimitMaxMessageBytes, config.protocol, &t.name);
        gauge_set(id(name, Kind::Gauge), t.limits.max_message_bytes.unwrap_or(0));
    }
}
