//! Connections held by a limit (onLimit: delay) and how they are retried. A held connection is
//! paused. Resuming it makes Envoy pass the held bytes on to the next filter without asking
//! this one again, so a retry first decides the held messages anew (with the stream as the
//! effective context, its held buffer can be read and rewritten) and resumes only when they may
//! all go. Retries run from the root context's tick — running only while someone waits, since
//! an idle tick costs CPU — and at the end of a callback in which capacity freed on this worker
//! (an in-flight reply, a closed connection), in the core [`WaitList`]'s order.

use proxy_wasm::hostcalls;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Weak;
use std::time::Duration;
use weighstation_core::waitlist::WaitList;

/// Envoy delivers ticks every ~4 ms at best.
const TICK: Duration = Duration::from_millis(5);

/// A connection that can decide its held bytes again.
pub trait Retry {
    /// Called with the connection as the effective context.
    fn retry(&self);
}

thread_local! {
    static WAITERS: RefCell<WaitList> = RefCell::new(WaitList::default());
    static HANDLES: RefCell<HashMap<u32, Weak<dyn Retry>>> = RefCell::new(HashMap::new());
    /// The root context that ticks for this VM: the most recently configured one.
    static DRIVER: RefCell<Option<u32>> = const { RefCell::new(None) };
    static TICKING: RefCell<bool> = const { RefCell::new(false) };
    /// The driver's tick while no one waits (global limits report from it; none: no tick).
    static IDLE_TICK: RefCell<Duration> = const { RefCell::new(Duration::ZERO) };
    static FREED: RefCell<Freed> = const { RefCell::new(Freed { names: Vec::new(), len: 0 }) };
}

/// The tenants whose capacity freed during the current callback: the first `len` names. The
/// strings are kept and overwritten, so a reply costs no allocation once a worker has warmed up.
struct Freed {
    names: Vec<String>,
    len: usize,
}

/// A new connection makes itself retryable.
pub fn register(me: u32, handle: Weak<dyn Retry>) {
    HANDLES.with(|h| h.borrow_mut().insert(me, handle));
}

/// A closed connection is forgotten.
pub fn forget(me: u32) {
    HANDLES.with(|h| h.borrow_mut().remove(&me));
    release(me);
}

pub fn set_driver(root_context_id: u32) {
    DRIVER.with(|d| *d.borrow_mut() = Some(root_context_id));
    TICKING.with(|t| *t.borrow_mut() = false);
    if WAITERS.with(|w| !w.borrow().is_empty()) {
        start_ticking(None);
    }
}

/// Sets the tick the driver keeps while no one waits; called from the driver's on_configure.
pub fn set_idle_tick(period: Duration) {
    IDLE_TICK.with(|i| *i.borrow_mut() = period);
    if !TICKING.with(|t| *t.borrow()) {
        let _ = hostcalls::set_tick_period(period);
    }
}

/// Registers (or re-arms) a held connection; `me` is the calling stream's context id, `since`
/// when its held message started waiting.
pub fn hold(me: u32, tenant: &str, since: u64, wake_at: u64) {
    WAITERS.with(|w| w.borrow_mut().hold(me, tenant, since, wake_at));
    start_ticking(Some(me));
}

pub fn release(me: u32) {
    WAITERS.with(|w| w.borrow_mut().release(me));
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

fn retry(id: u32) {
    let handle = HANDLES.with(|h| h.borrow().get(&id).and_then(Weak::upgrade));
    match handle {
        Some(conn) if hostcalls::set_effective_context(id).is_ok() => {
            conn.retry();
        }
        _ => forget(id), // the connection is gone
    }
}

/// From the driver root's on_tick: retry every waiter that is due, longest waiting first; stop
/// ticking when none wait.
pub fn tick(root: u32, now: u64) {
    let due = WAITERS.with(|w| w.borrow().due(now));
    for id in due {
        retry(id);
    }
    let _ = hostcalls::set_effective_context(root);
    if WAITERS.with(|w| w.borrow().is_empty()) {
        let _ = hostcalls::set_tick_period(IDLE_TICK.with(|i| *i.borrow()));
        TICKING.with(|t| *t.borrow_mut() = false);
    }
}

/// Capacity of `tenant` freed during the current callback (an in-flight reply, a closed
/// connection): its waiters on this worker are retried once the callback is done with its own
/// bytes, by [`retry_freed`].
pub fn capacity_freed(tenant: &str) {
    FREED.with(|f| {
        let Freed { names, len } = &mut *f.borrow_mut();
        if names[..*len].iter().any(|t| t == tenant) {
            return;
        }
        match names.get_mut(*len) {
            Some(slot) => {
                slot.clear();
                slot.push_str(tenant);
            }
            None => names.push(tenant.to_owned()),
        }
        *len += 1;
    });
}

/// At the end of stream `me`'s callback: retries, once each and longest waiting first, the other
/// waiters of every tenant whose capacity freed during it.
///
/// Once each, because a retry that forwards replaces the held connection's buffer and asks Envoy
/// to resume it, and Envoy resumes only after the whole callback: a second retry of the same
/// connection in the same callback would find those bytes still in Envoy's buffer and replace
/// them, sending them later, behind requests that followed them (responses out of order). One
/// reply per freed slot used to retry every waiter — several replies in one read retried the same
/// connection several times.
pub fn retry_freed(me: u32) {
    let ids = FREED.with(|f| {
        let Freed { names, len } = &mut *f.borrow_mut();
        let tenants = &names[..std::mem::take(len)];
        if tenants.is_empty() {
            return Vec::new();
        }
        WAITERS.with(|w| w.borrow().waiters_of(tenants, me))
    });
    if ids.is_empty() {
        return;
    }
    for id in ids {
        retry(id);
    }
    let _ = hostcalls::set_effective_context(me);
}
