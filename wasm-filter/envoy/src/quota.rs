//! Global limits, this process's side (weighstation_core::quota): one worker per Envoy process —
//! the leader, elected through shared data — reports each global limit's usage to the quota
//! service from its root context, once a second or, for a limit it refused or held messages
//! under, four times a second; and writes the shares it gets back into
//! the limits' shared state. Nothing here runs per message. When the service cannot answer
//! (down, slow past the deadline, an error), every global limit's share is dropped at once and
//! the process enforces limit ÷ live replicas until an answer comes back; a share nobody
//! renews lapses on its own after `SHARE_TTL_NS`, so a dead leader cannot keep a stale one.

use proxy_wasm::traits::Context;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::Duration;
use weighstation_core::config::Protocol;
use weighstation_core::leases::{Scope, SharedRate, Usage, SHARED_RATE_WORDS};
use weighstation_core::limits::RateLimit;
use weighstation_core::quota::{
    parse_shares, shares_request, steady_demand, Demand, LimitReport, QuotaService, REPORT_PERIOD_NS,
    SATURATED_REPORT_PERIOD_NS, SHARES_PATH, SHARE_TTL_NS,
};

use crate::{keys, metrics, shared, state, vm_token};

/// How often each worker looks at the leadership and whether a report is due: often enough
/// that a saturated limit's report (SATURATED_REPORT_PERIOD_NS) is not much later than due.
pub const TICK: Duration = Duration::from_millis(100);

/// A limit due within half a look is reported at this one: so a period is kept on average, not
/// rounded up to the next look, and limits due together go in one request.
const EARLY_NS: u64 = TICK.as_nanos() as u64 / 2;

/// Leadership: [holder's token, when it last ticked]. A leader silent this long is replaced.
const LEADER_KEY: &str = "weighstation/quota/leader";
const LEADER_LAPSE_NS: u64 = 3_000_000_000;

/// One global limit of the active configurations.
struct GlobalLimit {
    /// Its shared-data key; the quota service knows it without the `weighstation/` prefix,
    /// which every replica derives alike from the same policy.
    key: String,
    limit: RateLimit,
    demand: Demand,
    connections_key: String,
    /// The tenant's share and demand gauges (None for an override's or a client's limit).
    share_metric: Option<String>,
    demand_metric: Option<String>,
}

#[derive(Default)]
struct Setup {
    service: Option<QuotaService>,
    replica: String,
    limits: Vec<GlobalLimit>,
}

impl Setup {
    /// The live replicas a share falls back to dividing by.
    fn replicas(&self) -> u64 {
        self.service.as_ref().map_or(1, |q| q.replicas.max(1))
    }

    /// The scope the limits are enforced with (weighstation_core::leases::Scope::Global).
    fn scope(&self) -> Scope {
        Scope::Global {
            replicas: self.replicas(),
        }
    }
}

/// What the leader remembers between reports.
#[derive(Default)]
struct Leader {
    next_look: u64,
    /// Each limit's last report, by its shared-data key: each limit is reported on its own
    /// cadence (`Reported::due`), and one request carries the limits due together.
    reported: HashMap<String, Reported>,
    /// The earliest any limit is due again.
    next_due: u64,
    /// The outstanding call and when to give up on it.
    pending: Option<(u32, u64)>,
    /// Whether the process enforces shares (false: limit ÷ replicas).
    shared: Option<bool>,
}

/// One limit's last report.
#[derive(Clone, Copy)]
struct Reported {
    at: u64,
    /// Whether the process refused or held messages under the limit in that report's period.
    saturated: bool,
    /// Whether the next report is due after SATURATED_REPORT_PERIOD_NS: the process was
    /// saturated in this period or the one before. A replica whose clients stalled reports
    /// first a period that still holds some of their traffic, and the part it frees comes free
    /// at its report after: that one comes as soon.
    fast: bool,
    /// Its demand as measured then (see steady_demand); None if it had nothing to report.
    measured: Option<f64>,
}

impl Reported {
    /// When the limit is next reported: REPORT_PERIOD_NS after its last report, or
    /// SATURATED_REPORT_PERIOD_NS after one in or just after a period in which the process
    /// refused or held messages.
    fn due(&self) -> u64 {
        let period = if self.fast {
            SATURATED_REPORT_PERIOD_NS
        } else {
            REPORT_PERIOD_NS
        };
        self.at.saturating_add(period)
    }
}

thread_local! {
    static SETUP: RefCell<Setup> = RefCell::new(Setup::default());
    static LEADER: RefCell<Leader> = RefCell::new(Leader::default());
}

/// After a configuration is installed: collects the global limits of every active protocol.
/// True if there are any (the leader must tick).
pub fn configure(replica: String) -> bool {
    let mut setup = Setup::default();
    for protocol in [Protocol::Nats, Protocol::Kafka] {
        let Some(config) = state::active(protocol) else {
            continue;
        };
        if let Some(q) = &config.quota {
            setup.service = Some(q.clone());
        }
        let replicas = config.quota.as_ref().map_or(1, |q| q.replicas);
        for (id, t) in config.tenants.iter().enumerate().filter(|(_, t)| t.global) {
            let Some(plan) = config.plan(id) else { continue };
            let base = keys::tenant_base(protocol, &t.name);
            let connections_key = keys::connections_key(&base);
            let demand = if t.reject {
                Demand::Reject
            } else {
                Demand::Delay { replicas }
            };
            let gauge = |name: &str| format!("{name}.protocol.{}.tenant.{}", protocol.as_str(), t.name);
            let limit = |key: String, limit: RateLimit| GlobalLimit {
                key,
                limit,
                demand,
                connections_key: connections_key.clone(),
                share_metric: None,
                demand_metric: None,
            };
            setup.limits.push(GlobalLimit {
                share_metric: Some(gauge("weighstation_quota_share_ppm")),
                demand_metric: Some(gauge("weighstation_quota_demand")),
                ..limit(keys::tenant_rate_key(&base, &plan.rate), plan.rate)
            });
            for o in &plan.overrides {
                setup
                    .limits
                    .push(limit(keys::override_rate_key(&base, o.fingerprint), o.rate));
            }
            for n in plan.clients.iter().flat_map(|c| &c.named) {
                setup
                    .limits
                    .push(limit(keys::named_client_rate_key(&base, n.fingerprint), n.plan.rate));
            }
        }
    }
    setup.limits.retain(|l| !l.limit.is_unlimited());
    setup.replica = replica;
    let active = setup.service.is_some() && !setup.limits.is_empty();
    if active && setup.replica.is_empty() {
        log::warn!("weighstation: Envoy has no node id: the quota service cannot tell this replica apart");
    }
    SETUP.with(|s| *s.borrow_mut() = setup);
    active
}

/// From the ticking root context: keeps or takes the leadership and reports when due.
pub fn tick(root: &dyn Context, now: u64) {
    let due = LEADER.with(|l| {
        let mut l = l.borrow_mut();
        if now < l.next_look {
            return false;
        }
        l.next_look = now + TICK.as_nanos() as u64;
        true
    });
    if !due || SETUP.with(|s| s.borrow().limits.is_empty()) {
        return;
    }
    let token = vm_token::get();
    let (_, leading) = shared::update::<2>(LEADER_KEY, |[holder, seen]| {
        (holder == token || holder == 0 || seen.saturating_add(LEADER_LAPSE_NS) < now).then_some([token, now])
    });
    if !leading {
        return;
    }
    let report_due = LEADER.with(|l| {
        let mut l = l.borrow_mut();
        if let Some((_, give_up_at)) = l.pending {
            if now < give_up_at {
                return false;
            }
            l.pending = None; // its root context went away with a reload: the answer is lost
        }
        now.saturating_add(EARLY_NS) >= l.next_due
    });
    if report_due {
        report(root, now);
    }
}

/// Reports the limits that are due (see `Reported::due`) in one request.
fn report(root: &dyn Context, now: u64) {
    let earlier = LEADER.with(|l| std::mem::take(&mut l.borrow_mut().reported));
    let mut reported = HashMap::with_capacity(earlier.len());
    let (request, service) = SETUP.with(|s| {
        let s = s.borrow();
        let reports: Vec<LimitReport> = s
            .limits
            .iter()
            .filter_map(|g| {
                let last = earlier.get(&g.key).copied();
                if let Some(last) = last.filter(|r| now.saturating_add(EARLY_NS) < r.due()) {
                    reported.insert(g.key.clone(), last);
                    return None;
                }
                let since = last.map_or(0, |r| r.at);
                let period = if since == 0 { REPORT_PERIOD_NS } else { now - since };
                let usage = Cell::new(Usage::default());
                shared::update::<SHARED_RATE_WORDS>(&g.key, |w| {
                    let (next, u) = SharedRate::take_usage(w, since);
                    usage.set(u);
                    Some(next)
                });
                let connections = shared::read(&g.connections_key);
                let key = g.key.trim_start_matches("weighstation/").to_owned();
                let mut report = LimitReport::new(key, &g.limit, usage.get(), connections, period, g.demand);
                let measured = report.as_ref().map(|r| r.demand);
                if let Some(r) = report.as_mut() {
                    r.demand = steady_demand(last.and_then(|l| l.measured), r.demand);
                }
                let saturated = report.as_ref().is_some_and(|r| r.saturated);
                reported.insert(
                    g.key.clone(),
                    Reported {
                        at: now,
                        saturated,
                        fast: saturated || last.is_some_and(|l| l.saturated),
                        measured,
                    },
                );
                metrics::set_gauge(
                    g.demand_metric.as_deref(),
                    report.as_ref().map_or(0, |r| r.demand.round() as u64),
                );
                report
            })
            .collect();
        let replicas = s.service.as_ref().map_or(1, |q| q.replicas);
        let body = (!reports.is_empty()).then(|| shares_request(&s.replica, replicas, &reports));
        (body, s.service.clone())
    });
    LEADER.with(|l| {
        let mut l = l.borrow_mut();
        l.next_due = reported
            .values()
            .map(Reported::due)
            .min()
            .unwrap_or(now + REPORT_PERIOD_NS);
        l.reported = reported;
    });
    // Nothing to report: no traffic under any global limit, so no share to ask for.
    let (Some(body), Some(service)) = (request, service) else {
        return;
    };
    let timeout = Duration::from_millis(service.timeout_ms.max(1));
    let headers = vec![
        (":method", "POST"),
        (":path", SHARES_PATH),
        (":authority", service.authority.as_str()),
        ("content-type", "application/json"),
    ];
    match root.dispatch_http_call(&service.cluster, headers, Some(&body), vec![], timeout) {
        Ok(token) => {
            let give_up_at = now + timeout.as_nanos() as u64 + 1_000_000_000;
            LEADER.with(|l| l.borrow_mut().pending = Some((token, give_up_at)));
        }
        Err(e) => fall_back(&format!("cannot call cluster {}: {e:?}", service.cluster), now),
    }
}

/// The quota service's answer (or Envoy's: a timeout, no healthy host) to call `token`.
pub fn answer(root: &dyn Context, token: u32, body_size: usize, now: u64) {
    let ours = LEADER.with(|l| {
        let mut l = l.borrow_mut();
        let ours = l.pending.is_some_and(|(t, _)| t == token);
        if ours {
            l.pending = None;
        }
        ours
    });
    if !ours {
        return;
    }
    let status = root.get_http_call_response_header(":status").unwrap_or_default();
    let body = root.get_http_call_response_body(0, body_size).unwrap_or_default();
    if status != "200" {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).trim().to_owned();
        fall_back(&format!("quota service answered {status}: {text}"), now);
        return;
    }
    match parse_shares(&body) {
        Ok(shares) => {
            SETUP.with(|s| {
                let s = s.borrow();
                let scope = s.scope();
                let limits: HashMap<&str, &GlobalLimit> = s.limits.iter().map(|g| (g.key.as_str(), g)).collect();
                for (key, ppm) in shares {
                    let Some(g) = limits.get(format!("weighstation/{key}").as_str()) else {
                        continue; // a limit of a configuration since replaced
                    };
                    shared::update::<SHARED_RATE_WORDS>(&g.key, |w| {
                        Some(SharedRate::with_share(w, &g.limit, scope, ppm, now + SHARE_TTL_NS, now))
                    });
                    metrics::set_gauge(g.share_metric.as_deref(), ppm);
                }
            });
            standing(true, "quota service answered");
        }
        Err(e) => fall_back(&format!("quota service's answer unreadable: {e}"), now),
    }
}

/// Drops every global limit's share: the process enforces limit ÷ live replicas at once.
fn fall_back(why: &str, now: u64) {
    SETUP.with(|s| {
        let s = s.borrow();
        let replicas = s.replicas();
        let scope = s.scope();
        for g in &s.limits {
            shared::update::<SHARED_RATE_WORDS>(&g.key, |w| Some(SharedRate::without_share(w, &g.limit, scope, now)));
            metrics::set_gauge(g.share_metric.as_deref(), 1_000_000 / replicas);
        }
    });
    standing(false, why);
}

/// Records whether the process enforces shares; logs and publishes a change.
fn standing(on_shares: bool, why: &str) {
    let changed = LEADER.with(|l| l.borrow_mut().shared.replace(on_shares) != Some(on_shares));
    if !changed {
        return;
    }
    metrics::set_gauge(Some("weighstation_quota_fallback"), u64::from(!on_shares));
    let replicas = SETUP.with(|s| s.borrow().service.as_ref().map_or(1, |q| q.replicas));
    if on_shares {
        log::info!("weighstation: global limits on shares from the quota service ({why})");
    } else {
        log::warn!("weighstation: global limits fall back to limit / {replicas} live replicas: {why}");
    }
}
