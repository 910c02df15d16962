//! The tenant feed, this worker's side (control-plane/internal/tenantfeed): each worker holds
//! one long poll per protocol open at the control plane, naming the policy version it runs and
//! the replica count it divides by. The answer is what changed since: the tenants it names are
//! parsed and installed, every other tenant kept as it is (Config::with_delta). Nothing here
//! runs per message; the ECDS configuration stays the base a worker starts from.

use proxy_wasm::traits::Context;
use std::cell::RefCell;
use std::fmt::Write;
use std::time::Duration;
use weighstation_core::config::{Config, Protocol};
use weighstation_core::metrics::tenant_feed_polls_metric_name;

use crate::{metrics, root, state, vm_token};

/// The control plane holds a poll 20 s when nothing changes (tenantfeed.Hold).
const TIMEOUT: Duration = Duration::from_secs(30);

/// A poll unanswered this long is polled again (its answer, should it come, is dropped): the
/// control plane answers within 20 s, so it was lost.
const GIVE_UP_NS: u64 = 25_000_000_000;

/// After a failed poll, the next one waits this long.
const RETRY_NS: u64 = 1_000_000_000;

const PATH: &str = "/v1/tenants";

#[derive(Default)]
struct Poll {
    /// The outstanding call and when to give up on it.
    pending: Option<(u32, u64)>,
    /// The root context that made it: its answer goes there, and is lost with it.
    root: u32,
    retry_at: u64,
    /// Whether the last poll failed (logged on change).
    failing: bool,
}

#[derive(Default)]
struct Feed {
    polls: [Poll; 2],
}

thread_local! {
    static FEED: RefCell<Feed> = RefCell::new(Feed::default());
}

/// A protocol's configuration came through ECDS: its poll starts over from that version (an
/// answer to the poll before is dropped).
pub fn configured(protocol: Protocol) {
    FEED.with(|f| f.borrow_mut().polls[protocol.index()] = Poll::default());
}

/// A root context is gone, and the answers to the polls it made with it: they are polled again.
pub fn root_gone(root: u32) {
    FEED.with(|f| {
        for p in f.borrow_mut().polls.iter_mut().filter(|p| p.root == root) {
            p.pending = None;
        }
    });
}

/// From the ticking root context `id`: opens each protocol's poll when none is open.
pub fn tick(root: &dyn Context, id: u32, now: u64) {
    for protocol in Protocol::ALL {
        poll(root, id, protocol, now);
    }
}

fn poll(root: &dyn Context, id: u32, protocol: Protocol, now: u64) {
    let Some(config) = state::active(protocol).filter(|c| c.feed) else {
        return;
    };
    let Some(target) = &config.reports else { return };
    let due = FEED.with(|f| {
        let p = &f.borrow().polls[protocol.index()];
        now >= p.retry_at && p.pending.is_none_or(|(_, give_up_at)| now >= give_up_at)
    });
    if !due {
        return;
    }
    // The control plane tells this node's workers apart by it.
    let worker = vm_token::get();
    // The count the control plane last told this worker, with global tenants or without: were it
    // the quota's, a worker without would name 1 to a feed counting 2, be answered at once, and
    // poll again at once, forever.
    let replicas = config.replicas;
    let mut path = format!(
        "{PATH}?protocol={}&replicas={replicas}&worker={worker}",
        protocol.as_str()
    );
    for (name, value) in [("applied", config.version.as_str()), ("node", &root::replica(root))] {
        let _ = write!(path, "&{name}=");
        escape(&mut path, value);
    }
    let headers = vec![
        (":method", "GET"),
        (":path", path.as_str()),
        (":authority", target.authority.as_str()),
    ];
    let call = root.dispatch_http_call(&target.cluster, headers, None, vec![], TIMEOUT);
    FEED.with(|f| {
        let p = &mut f.borrow_mut().polls[protocol.index()];
        match call {
            Ok(token) => {
                p.pending = Some((token, now + GIVE_UP_NS));
                p.root = id;
                metrics::count(&tenant_feed_polls_metric_name(protocol), 1);
            }
            Err(e) => failed(p, now, &format!("cannot call cluster {}: {e:?}", target.cluster)),
        }
    });
}

/// Percent-encodes a query value.
fn escape(out: &mut String, value: &str) {
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

fn failed(p: &mut Poll, now: u64, why: &str) {
    p.pending = None;
    p.retry_at = now + RETRY_NS;
    if !p.failing {
        log::warn!("weighstation: the tenant feed cannot be polled: {why}");
    }
    p.failing = true;
}

/// What a call's answer was to the feed.
pub enum Answer {
    /// Not a poll of the feed.
    NotOurs,
    /// Nothing to install (nothing changed, or the poll failed).
    Nothing,
    /// The configuration the delta makes: to install.
    Install(Box<Config>),
}

/// The control plane's answer to call `token`.
pub fn answer(root: &dyn Context, token: u32, body_size: usize, now: u64) -> Answer {
    let protocol = FEED.with(|f| {
        let mut f = f.borrow_mut();
        let i = f
            .polls
            .iter()
            .position(|p| p.pending.is_some_and(|(t, _)| t == token))?;
        f.polls[i].pending = None;
        Some(Protocol::ALL[i])
    });
    let Some(protocol) = protocol else {
        return Answer::NotOurs;
    };
    let status = root.get_http_call_response_header(":status").unwrap_or_default();
    let outcome = match status.as_str() {
        "204" => Ok(None),
        "200" => {
            let body = root.get_http_call_response_body(0, body_size).unwrap_or_default();
            match state::active(protocol) {
                Some(active) => state::apply_delta(&active, &body).map(Some).map_err(|e| e.to_string()),
                None => Ok(None),
            }
        }
        _ => Err(format!("control plane answered {status:?}")),
    };
    FEED.with(|f| {
        let p = &mut f.borrow_mut().polls[protocol.index()];
        match &outcome {
            Err(why) => failed(p, now, why),
            Ok(_) => {
                if p.failing {
                    log::info!("weighstation: the tenant feed is polled again");
                }
                p.failing = false;
            }
        }
    });
    match outcome {
        Ok(Some(config)) => Answer::Install(Box::new(config)),
        _ => Answer::Nothing,
    }
}
