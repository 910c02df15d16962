//! This worker's leases (weighstation_core::leases), one per shared-data key: every connection
//! of a tenant on this worker spends from the same block. Rate keys carry the limit's
//! fingerprint, so a changed limit gets a fresh lease; a reload drops the leases no connection
//! uses any more, giving their idle in-flight slots back first.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use weighstation_core::leases::{RateLease, SlotLease};

use crate::shared;

thread_local! {
    static RATE: RefCell<HashMap<String, Rc<RefCell<RateLease>>>> = RefCell::new(HashMap::new());
    static SLOTS: RefCell<HashMap<Rc<str>, Rc<RefCell<SlotLease>>>> = RefCell::new(HashMap::new());
}

/// This worker's lease on the rate limit kept at `key`.
pub fn rate(key: &str) -> Rc<RefCell<RateLease>> {
    RATE.with(|m| m.borrow_mut().entry(key.to_owned()).or_default().clone())
}

/// This worker's idle slots of the in-flight limit counted at `key`.
pub fn slots(key: &Rc<str>) -> Rc<RefCell<SlotLease>> {
    SLOTS.with(|m| m.borrow_mut().entry(key.clone()).or_default().clone())
}

/// Forgets the leases no connection refers to. An unused rate lease lapses by itself (its
/// tokens are the next epoch's); idle slots are given back to the shared count now.
pub fn prune() {
    RATE.with(|m| m.borrow_mut().retain(|_, l| Rc::strong_count(l) > 1));
    SLOTS.with(|m| {
        m.borrow_mut().retain(|key, l| {
            if Rc::strong_count(l) > 1 {
                return true;
            }
            shared::give_back(key, l.borrow_mut().surrender());
            false
        })
    });
}
