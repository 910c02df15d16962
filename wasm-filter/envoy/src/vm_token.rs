//! This VM's token: how the control plane (usage reports, tenant-feed polls) and the quota
//! leadership in shared data tell the Wasm VMs of one Envoy (one per worker, one on the main
//! thread) apart.

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};

thread_local! {
    static TOKEN: Cell<u64> = const { Cell::new(0) };
}

/// Random (WASI random_get seeds RandomState), odd so never 0, and the same for the VM's life.
/// Not the time the VM first configured: the workers one filter configuration reaches read the
/// same microsecond of Envoy's clock (seen in about one start in three on 2 cores), and two
/// workers named alike had their usage reports counted as one worker's, half of them lost.
pub fn get() -> u64 {
    TOKEN.with(|t| {
        if t.get() == 0 {
            t.set(RandomState::new().hash_one(crate::clock::now_ns()) | 1);
        }
        t.get()
    })
}
