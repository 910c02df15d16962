//! A worker's usage per (protocol, tenant): counters since the worker started and its part of
//! the gauges. A tenant gets a slot once (when a connection first needs its metrics); counting
//! is then an index and an add.

use serde::Serialize;

use crate::limits::Reason;
use crate::protocol::Protocol;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantUsage {
    pub protocol: &'static str,
    pub tenant: String,
    pub messages: u64,
    pub bytes: u64,
    pub delayed: u64,
    /// Summed time delayed messages were held.
    pub delayed_ms: u64,
    /// By reason, in [`Reason::ALL`] order.
    pub refused: [u64; 5],
    pub would_refuse: [u64; 5],
    pub connections: i64,
    pub in_flight: i64,
    pub held: i64,
}

#[derive(Debug, Default)]
pub struct Tally {
    tenants: Vec<TenantUsage>,
}

impl Tally {
    /// The slot of a tenant's usage, made on first sight.
    pub fn slot(&mut self, protocol: Protocol, tenant: &str) -> usize {
        let p = protocol.as_str();
        if let Some(i) = self.tenants.iter().position(|t| t.protocol == p && t.tenant == tenant) {
            return i;
        }
        self.tenants.push(TenantUsage {
            protocol: p,
            tenant: tenant.to_owned(),
            ..TenantUsage::default()
        });
        self.tenants.len() - 1
    }

    pub fn get_mut(&mut self, slot: usize) -> Option<&mut TenantUsage> {
        self.tenants.get_mut(slot)
    }

    /// What to report: every tenant this worker has seen (a counter that stops moving still
    /// tells the control plane the worker is alive).
    pub fn tenants(&self) -> &[TenantUsage] {
        &self.tenants
    }
}

impl TenantUsage {
    pub fn refused(&mut self, reason: Reason, n: u64) {
        if let Some(c) = self.refused.get_mut(reason.index()) {
            *c = c.saturating_add(n);
        }
    }

    pub fn would_refuse(&mut self, reason: Reason, n: u64) {
        if let Some(c) = self.would_refuse.get_mut(reason.index()) {
            *c = c.saturating_add(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_keeps_its_slot_per_protocol() {
        let mut t = Tally::default();
        let a = t.slot(Protocol::Nats, "acme");
        let k = t.slot(Protocol::Kafka, "acme");
        assert_ne!(a, k);
        assert_eq!(t.slot(Protocol::Nats, "acme"), a);
        if let Some(u) = t.get_mut(a) {
            u.messages += 3;
            u.refused(Reason::Rate, 2);
        }
        assert_eq!(t.tenants()[a].messages, 3);
        assert_eq!(t.tenants()[a].refused, [0, 2, 0, 0, 0]);
        assert_eq!(t.tenants()[k].messages, 0);
    }
}
