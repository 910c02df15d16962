//! A worker's usage per (protocol, tenant): counters since the worker started and its part of
//! the gauges. A tenant gets a slot once (when a connection first needs its metrics); counting
//! is then an index and an add.

use serde::Serialize;

use super::clients::TopClients;
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
    pub refused: [u64; 6],
    pub would_refuse: [u64; 6],
    pub connections: i64,
    pub in_flight: i64,
    pub held: i64,
    /// The read side: record bytes delivered to consumers, and fetches throttled or held.
    pub consumed: u64,
    pub consume_throttled: u64,
    /// The busiest subjects (NATS, sampled) or topics (Kafka) since the last report.
    pub subjects: TopSubjects,
    /// The busiest clients since the last report (tenants with client limits).
    #[serde(skip_serializing_if = "TopClients::is_empty")]
    pub clients: TopClients,
}

/// How many subjects a tenant's table keeps.
const TOP_SUBJECTS: usize = 8;

/// The heaviest subjects by the Space-Saving algorithm: a subject not in a full table replaces
/// the lightest and inherits its count, so a subject's count is never under its true weight and
/// any subject heavier than 1/8 of the total is in the table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct TopSubjects(Vec<SubjectCount>);

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SubjectCount {
    pub subject: String,
    pub messages: u64,
}

impl TopSubjects {
    pub fn add(&mut self, subject: &[u8], messages: u64) {
        let entries = &mut self.0;
        if let Some(e) = entries.iter_mut().find(|e| e.subject.as_bytes() == subject) {
            e.messages += messages;
            return;
        }
        if entries.len() < TOP_SUBJECTS {
            entries.push(SubjectCount {
                subject: String::from_utf8_lossy(subject).into_owned(),
                messages,
            });
            return;
        }
        if let Some(lightest) = entries.iter_mut().min_by_key(|e| e.messages) {
            lightest.subject.clear();
            lightest.subject.push_str(&String::from_utf8_lossy(subject));
            lightest.messages += messages;
        }
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    pub fn entries(&self) -> &[SubjectCount] {
        &self.0
    }
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

    /// After a report: subjects are counted per report period.
    pub fn reported(&mut self) {
        for t in &mut self.tenants {
            t.subjects.clear();
            t.clients.clear();
        }
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
        assert_eq!(t.tenants()[a].refused, [0, 2, 0, 0, 0, 0]);
        assert_eq!(t.tenants()[k].messages, 0);
    }

    #[test]
    fn top_subjects_keep_the_heavy_ones_and_never_undercount() {
        let mut top = TopSubjects::default();
        for i in 0..1000u64 {
            top.add(b"orders.new", 5);
            top.add(format!("noise.{i}").as_bytes(), 1);
            if i % 4 == 0 {
                top.add(b"audit", 1);
            }
        }
        let count = |s: &str| top.entries().iter().find(|e| e.subject == s).map(|e| e.messages);
        assert_eq!(
            count("orders.new"),
            Some(5000),
            "counted exactly while it stays in the table"
        );
        assert_eq!(top.entries().len(), TOP_SUBJECTS);
        let total: u64 = top.entries().iter().map(|e| e.messages).sum();
        assert_eq!(total, 5000 + 1000 + 250, "Space-Saving keeps the total");
    }
}
