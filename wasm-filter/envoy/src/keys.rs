//! Shared-data keys of a tenant's limiter state. Counters (in-flight, queue, connections) are
//! keyed by tenant alone, so a reload never forgets them; rate state is keyed by the limit's
//! fingerprint too, so an unchanged limit keeps its bucket and a changed one starts afresh.

use std::rc::Rc;
use weighstation_core::config::{Protocol, TenantPlan};

#[derive(Debug)]
pub struct OverrideKeys {
    pub rate: String,
    pub in_flight: Rc<str>,
}

#[derive(Debug)]
pub struct TenantKeys {
    pub rate: String,
    pub in_flight: Rc<str>,
    pub queue: String,
    pub connections: String,
    pub overrides: Vec<OverrideKeys>,
}

impl TenantKeys {
    pub fn new(protocol: Protocol, tenant: &str, plan: &TenantPlan) -> TenantKeys {
        let base = format!("weighstation/{}/{tenant}", protocol.as_str());
        TenantKeys {
            rate: format!("{base}/rate/{:016x}", plan.rate.fingerprint()),
            in_flight: Rc::from(format!("{base}/inflight")),
            queue: format!("{base}/queue"),
            connections: format!("{base}/connections"),
            overrides: plan
                .overrides
                .iter()
                .map(|o| OverrideKeys {
                    rate: format!("{base}/override/{:016x}/rate", o.fingerprint),
                    in_flight: Rc::from(format!("{base}/override/{:016x}/inflight", o.fingerprint)),
                })
                .collect(),
        }
    }
}
