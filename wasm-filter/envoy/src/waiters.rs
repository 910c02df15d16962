//! Connections held by a limit (onLimit: delay) and how they are woken. A held connection is
//! paused; the root context's tick (running only while someone waits: an idle tick costs CPU)
//! resumes each one when it is due, and Envoy then presents its buffer again so the held message
//! is decided anew. Capacity freed on this worker (an in-flight reply) wakes the tenant's
//! waiters at once instead of at the next tick.

use proxy_wasm::hostcalls;
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

/// Envoy delivers ticks every ~4 ms at best.
const TICK: Duration = Duration::from_millis(5);

struct Waiter {
    wake_at: u64,
    tenant: String,
}

thread_local! {
    static WAITERS: RefCell<HashMap<u32, Waiter>> = RefCell::new(HashMap::new());
    /// The root context that ticks for this VM: the most recently configured one.
    static DRIVER: RefCell<Option<u32>> = const { RefCell::new(None) };
    static TICKING: RefCell<bool> = const { RefCell::new(false) };
}

pub fn set_driver(root_context_id: u32) {
    DRIVER.with(|d| *d.borrow_mut() = Some(root_context_id));
    TICKING.with(|t| *t.borrow_mut() = false);
    if WAITERS.with(|w| !w.borrow().is_empty()) {
        start_ticking(None);
    }
}

/// Registers (or re-arms) a held connection; `me` is the calling stream's context id.
pub fn hold(me: u32, tenant: &str, wake_at: u64) {
    WAITERS.with(|w| {
        let mut w = w.borrow_mut();
        match w.get_mut(&me) {
            Some(existing) => existing.wake_at = wake_at,
            None => {
                w.insert(
                    me,
                    Waiter {
                        wake_at,
                        tenant: tenant.to_owned(),
                    },
                );
            }
        }
    });
    start_ticking(Some(me));
}

pub fn release(me: u32) {
    WAITERS.with(|w| w.borrow_mut().remove(&me));
}

/// Starts the driver's tick; host calls act on the effective context, so switch to the root
/// and back to the caller.
fn start_ticking(me: Option<u32>) {
    if TICKING.with(|t| *t.borrow()) {
        return;
    }
    let Some(root) = DRIVER.with(|d| *d.borrow()) else {
        return;
    };
    if hostcalls::set_effective_context(root).is_ok() && hostcalls::set_tick_period(TICK).is_ok() {
        TICKING.with(|t| *t.borrow_mut() = true);
    }
    if let Some(me) = me {
        let _ = hostcalls::set_effective_context(me);
    }
}

fn resume(id: u32) -> bool {
    hostcalls::set_effective_context(id).is_ok() && hostcalls::resume_downstream().is_ok()
}

/// From the driver root's on_tick: resume every waiter that is due; stop ticking when none wait.
pub fn tick(root: u32, now: u64) {
    let due: Vec<u32> = WAITERS.with(|w| {
        w.borrow()
            .iter()
            .filter(|(_, v)| v.wake_at <= now)
            .map(|(id, _)| *id)
            .collect()
    });
    for id in due {
        if !resume(id) {
            release(id); // the connection is gone
        }
    }
    let _ = hostcalls::set_effective_context(root);
    if WAITERS.with(|w| w.borrow().is_empty()) {
        let _ = hostcalls::set_tick_period(Duration::ZERO);
        TICKING.with(|t| *t.borrow_mut() = false);
    }
}

/// Resumes the tenant's waiters on this worker now, from stream `me`'s callback.
pub fn wake_tenant(me: u32, tenant: &str) {
    let ids: Vec<u32> = WAITERS.with(|w| {
        w.borrow()
            .iter()
            .filter(|(_, v)| v.tenant == tenant)
            .map(|(id, _)| *id)
            .collect()
    });
    if ids.is_empty() {
        return;
    }
    for id in ids {
        resume(id);
    }
    let _ = hostcalls::set_effective_context(me);
}
