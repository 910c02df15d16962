//! Global limits, this process's side (weighstation_core::quota): one worker per Envoy process —
//! the leader, elected through shared data — reports each global limit's usage to the quota
//! service about once a second from its root context, and writes the shares it gets back into
//! the limits' shared state. Nothing here runs per message. When the service cannot answer
//! (down, slow past the deadline, an error), every global limit's share is dropped at once and
//! the process enforces limit ÷ live replicas until an answer comes back; a share nobody
//! renews lapses on its own after `SHARE_TTL_NS`, so a dead leader cannot keep a stale one.

use proxy_wasm::traits::Context;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::Duration;
use weighstation_core::config::Protocol;
use weighstation_core::leases::{SharedRate, Usage, SHARED_RATE_WORDS};
use weighstation_core::limits::RateLimit;
use weighstation_core::quota::{
    parse_shares, shares_request, steady_demand, Demand, LimitReport, QuotaService, REPORT_PERIOD_NS,
    SATURATED_REPORT_PERIOD_NS, SHARES_PATH, SHARE_TTL_NS,
};

use crate::{keys, metrics, shared, state};

/// How often each worker looks at the leadership and whether a report is due.
const TICK: Duration = Duration::from_millis(200);

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

/// What the leader remembers between reports.
#[derive(Default)]
struct Leader {
    /// This VM's token in the leadership record.
    token: u64,
    next_look: u64,
    last_report: u64,
    /// Until the next report: REPORT_PERIOD_NS, or SATURATED_REPORT_PERIOD_NS after a report in
    /// which the process refused or held messages.
    period: u64,
    /// The outstanding call and when to give up on it.
    pending: Option<(u32, u64)>,
    /// Whether the process enforces shares (false: limit ÷ replicas).
    shared: Option<bool>,
    /// Each limit's demand as measured for the last report (see steady_demand).
    measured: HashMap<String, f64>,
}

thread_local! {
    static SETUP: RefCell<Setup> = RefCell::new(Setup::default());
    static LEADER: RefCell<Leader> = RefCell::new(Leader::default());
}

/// After a configuration is installed: collects the global limits of every active protocol.
/// True if there are any (the leader must tick).
pub fn configure(replica: String, now: u64) -> bool {
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
    LEADER.with(|l| {
        let mut l = l.borrow_mut();
        if l.token == 0 {
            l.token = now | 1;
        }
    });
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
    let token = LEADER.with(|l| l.borrow().token);
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
        now >= l.last_report.saturating_add(l.period.max(SATURATED_REPORT_PERIOD_NS))
    });
    if report_due {
        report(root, now);
    }
}

fn report(root: &dyn Context, now: u64) {
    let since = LEADER.with(|l| l.borrow().last_report);
    let period = if since == 0 { REPORT_PERIOD_NS } else { now - since };
    let mut measured = HashMap::new();
    let (request, service, saturated) = SETUP.with(|s| {
        let s = s.borrow();
        let reports: Vec<LimitReport> = s
            .limits
            .iter()
            .filter_map(|g| {
                let usage = Cell::new(Usage::default());
                shared::update::<SHARED_RATE_WORDS>(&g.key, |w| {
                    let (next, u) = SharedRate::take_usage(w, since);
                    usage.set(u);
                    Some(next)
                });
                let connections = shared::read(&g.connections_key);
                let key = g.key.trim_start_matches("weighstation/").to_owned();
                let mut report = LimitReport::new(key, &g.limit, usage.get(), connections, period, g.demand);
                if let Some(r) = report.as_mut() {
                    let previous = LEADER.with(|l| l.borrow().measured.get(&r.key).copied());
                    measured.insert(r.key.clone(), r.demand);
                    r.demand = steady_demand(previous, r.demand);
                }
                metrics::set_gauge(
                    g.demand_metric.as_deref(),
                    report.as_ref().map_or(0, |r| r.demand.round() as u64),
                );
                report
            })
            .collect();
        let replicas = s.service.as_ref().map_or(1, |q| q.replicas);
        let body = (!reports.is_empty()).then(|| shares_request(&s.replica, replicas, &reports));
        let saturated = reports.iter().any(|r| r.saturated);
        (body, s.service.clone(), saturated)
    });
    LEADER.with(|l| {
        let mut l = l.borrow_mut();
        l.last_report = now;
        l.period = if saturated {
            SATURATED_REPORT_PERIOD_NS
        } else {
            REPORT_PERIOD_NS
        };
        l.measured = measured;
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
        Err(e) => fall_back(&format!("cannot call cluster {}: {e:?}", service.cluster)),
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
        fall_back(&format!("quota service answered {status}: {text}"));
        return;
    }
    match parse_shares(&body) {
        Ok(shares) => {
            SETUP.with(|s| {
                for (key, ppm) in shares {
                    let key = format!("weighstation/{key}");
                    shared::update::<SHARED_RATE_WORDS>(&key, |w| {
                        Some(SharedRate::with_share(w, ppm, now + SHARE_TTL_NS))
                    });
                    if let Some(g) = s.borrow().limits.iter().find(|g| g.key == key) {
                        metrics::set_gauge(g.share_metric.as_deref(), ppm);
                    }
                }
            });
            standing(true, "quota service answered");
        }
        Err(e) => fall_back(&format!("quota service's answer unreadable: {e}")),
    }
}

/// Drops every global limit's share: the process enforces limit ÷ live replicas at once.
fn fall_back(why: &str) {
    SETUP.with(|s| {
        let s = s.borrow();
        let replicas = s.service.as_ref().map_or(1, |q| q.replicas.max(1));
        for g in &s.limits {
            shared::update::<SHARED_RATE_WORDS>(&g.key, |w| Some(SharedRate::without_share(w)));
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
