//! Shared-data keys of a tenant's limiter state. Counters (in-flight, queue, connections) are
//! keyed by tenant alone, so a reload never forgets them; rate state is keyed by the limit's
//! fingerprint too, so an unchanged limit keeps its bucket and a changed one starts afresh.
//! With each rate and in-flight key goes this worker's lease on it.

use std::cell::RefCell;
use std::rc::Rc;
use weighstation_core::config::{Protocol, TenantPlan};
use weighstation_core::leases::{RateLease, SlotLease};
use weighstation_core::limits::RateLimit;

use crate::leases;

/// A rate limit's shared-data key and this worker's lease on it.
#[derive(Debug)]
pub struct RateKey {
    pub key: String,
    pub lease: Rc<RefCell<RateLease>>,
}

impl RateKey {
    fn new(key: String, limit: &RateLimit) -> RateKey {
        RateKey {
            lease: leases::rate(&key, limit),
            key,
        }
    }
}

/// An in-flight count's shared-data key and this worker's idle slots of it.
#[derive(Debug, Clone)]
pub struct SlotKey {
    pub key: Rc<str>,
    pub lease: Rc<RefCell<SlotLease>>,
}

impl SlotKey {
    fn new(key: String) -> SlotKey {
        let key: Rc<str> = Rc::from(key);
        SlotKey {
            lease: leases::slots(&key),
            key,
        }
    }
}

#[derive(Debug)]
pub struct OverrideKeys {
    pub rate: RateKey,
    pub in_flight: SlotKey,
}

#[derive(Debug)]
pub struct TenantKeys {
    pub rate: RateKey,
    pub in_flight: SlotKey,
    pub queue: String,
    pub connections: String,
    pub overrides: Vec<OverrideKeys>,
}

impl TenantKeys {
    pub fn new(protocol: Protocol, tenant: &str, plan: &TenantPlan) -> TenantKeys {
        let base = format!("weighstation/{}/{tenant}", protocol.as_str());
        TenantKeys {
            rate: RateKey::new(format!("{base}/rate/{:016x}", plan.rate.fingerprint()), &plan.rate),
            in_flight: SlotKey::new(format!("{base}/inflight")),
            queue: format!("{base}/queue"),
            connections: format!("{base}/connections"),
            overrides: plan
                .overrides
                .iter()
                .map(|o| OverrideKeys {
                    rate: RateKey::new(format!("{base}/override/{:016x}/rate", o.fingerprint), &o.rate),
                    in_flight: SlotKey::new(format!("{base}/override/{:016x}/inflight", o.fingerprint)),
                })
                .collect(),
        }
    }
}
