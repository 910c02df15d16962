//! This worker's leases (weighstation_core::leases), one per shared-data key: every connection
//! of a tenant on this worker spends from the same block. Rate keys carry the limit's
//! fingerprint, so a changed limit gets a fresh lease; a reload drops the leases no connection
//! uses any more, giving back their unspent tokens and idle in-flight slots first.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use weighstation_core::leases::{RateLease, Scope, SlotLease, SHARED_RATE_WORDS};
use weighstation_core::limits::RateLimit;

use crate::{clock, shared};

/// A lease with the limit it is on (what giving it back needs).
type Leased = (RateLimit, Scope, Rc<RefCell<RateLease>>);

thread_local! {
    static RATE: RefCell<HashMap<String, Leased>> = RefCell::new(HashMap::new());
    static SLOTS: RefCell<HashMap<Rc<str>, Rc<RefCell<SlotLease>>>> = RefCell::new(HashMap::new());
}

/// This worker's lease on the rate limit kept at `key`.
pub fn rate(key: &str, limit: &RateLimit, scope: Scope) -> Rc<RefCell<RateLease>> {
    RATE.with(|m| {
        let mut m = m.borrow_mut();
        let entry = m
            .entry(key.to_owned())
            .or_insert_with(|| (*limit, scope, Rc::default()));
        // A reload may change the replica count a global limit falls back to.
        entry.1 = scope;
        entry.2.clone()
    })
}

/// This worker's idle slots of the in-flight limit counted at `key`.
pub fn slots(key: &Rc<str>) -> Rc<RefCell<SlotLease>> {
    SLOTS.with(|m| m.borrow_mut().entry(key.clone()).or_default().clone())
}

/// Forgets the leases no connection refers to, giving back what they hold.
pub fn prune() {
    let now = clock::now_ns();
    RATE.with(|m| {
        m.borrow_mut().retain(|key, (limit, scope, l)| {
            if Rc::strong_count(l) > 1 {
                return true;
            }
            let lease = l.borrow();
            if lease.holds() {
                shared::update::<SHARED_RATE_WORDS>(key, |w| Some(lease.surrender(limit, *scope, w, now)));
            }
            false
        })
    });
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
