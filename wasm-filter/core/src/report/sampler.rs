//! Decision sampling per (protocol, tenant, decision) and second: the first `per_second` are
//! kept as events, the rest only counted, so a tenant refused 100,000 times a second costs the
//! report a handful of events and one count.

use serde::Serialize;

use crate::limits::Reason;
use crate::protocol::Protocol;

/// What was decided: refused (or held past the threshold) for a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Refused(Reason),
    Delayed,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Refused(r) => r.as_str(),
            Kind::Delayed => "delayed",
        }
    }
}

#[derive(Debug)]
struct Entry {
    protocol: Protocol,
    tenant: String,
    kind: Kind,
    second: u64,
    kept: u32,
    suppressed: u64,
}

/// Decisions counted but not kept since the last report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suppressed {
    pub protocol: &'static str,
    pub tenant: String,
    /// A reason (size, rate, inflight, queue, connections) or "delayed".
    pub decision: &'static str,
    pub count: u64,
}

#[derive(Debug, Default)]
pub struct Sampler {
    per_second: u32,
    entries: Vec<Entry>,
}

impl Sampler {
    pub fn set_per_second(&mut self, per_second: u32) {
        self.per_second = per_second;
    }

    /// Whether a decision at `now_ns` is kept as an event; if not, it is counted.
    pub fn keep(&mut self, protocol: Protocol, tenant: &str, kind: Kind, now_ns: u64) -> bool {
        let second = now_ns / 1_000_000_000;
        let i = match self
            .entries
            .iter()
            .position(|e| e.kind == kind && e.protocol == protocol && e.tenant == tenant)
        {
            Some(i) => i,
            None => {
                self.entries.push(Entry {
                    protocol,
                    tenant: tenant.to_owned(),
                    kind,
                    second,
                    kept: 0,
                    suppressed: 0,
                });
                self.entries.len() - 1
            }
        };
        let Some(e) = self.entries.get_mut(i) else {
            return false;
        };
        if e.second != second {
            e.second = second;
            e.kept = 0;
        }
        if e.kept < self.per_second {
            e.kept += 1;
            true
        } else {
            e.suppressed += 1;
            false
        }
    }

    /// The counts since the last call; entries with nothing to say are dropped, so a tenant
    /// gone from the policy does not stay forever.
    pub fn take_suppressed(&mut self, now_ns: u64) -> Vec<Suppressed> {
        let second = now_ns / 1_000_000_000;
        let out = self
            .entries
            .iter_mut()
            .filter(|e| e.suppressed > 0)
            .map(|e| Suppressed {
                protocol: e.protocol.as_str(),
                tenant: e.tenant.clone(),
                decision: e.kind.as_str(),
                count: std::mem::take(&mut e.suppressed),
            })
            .collect();
        self.entries.retain(|e| e.second + 1 >= second);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn keeps_the_first_n_per_second_and_counts_the_rest() {
        let mut s = Sampler::default();
        s.set_per_second(3);
        let rate = Kind::Refused(Reason::Rate);
        let kept = (0..10)
            .filter(|i| s.keep(Protocol::Nats, "acme", rate, 5 * S + i))
            .count();
        assert_eq!(kept, 3);
        assert!(
            s.keep(Protocol::Nats, "acme", Kind::Refused(Reason::Size), 5 * S),
            "another reason"
        );
        assert!(s.keep(Protocol::Kafka, "acme", rate, 5 * S), "another protocol");
        assert!(s.keep(Protocol::Nats, "globex", rate, 5 * S), "another tenant");
        assert!(s.keep(Protocol::Nats, "acme", rate, 6 * S), "the next second");
        assert_eq!(
            s.take_suppressed(6 * S),
            vec![Suppressed {
                protocol: "nats",
                tenant: "acme".into(),
                decision: "rate",
                count: 7
            }]
        );
        assert!(s.take_suppressed(6 * S).is_empty(), "counted once");
    }

    #[test]
    fn zero_per_second_keeps_nothing_and_counts_everything() {
        let mut s = Sampler::default();
        assert!(!s.keep(Protocol::Nats, "acme", Kind::Delayed, 0));
        assert_eq!(s.take_suppressed(0)[0].count, 1);
    }

    #[test]
    fn quiet_entries_are_forgotten() {
        let mut s = Sampler::default();
        s.set_per_second(1);
        s.keep(Protocol::Nats, "gone", Kind::Delayed, 0);
        s.take_suppressed(10 * S);
        assert!(s.entries.is_empty());
    }
}
