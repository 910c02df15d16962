//! Usage and decisions, this worker's side (weighstation_core::report): every worker VM counts
//! its tenants' traffic in a [`Tally`] and keeps the decisions its [`Sampler`] lets through, and
//! posts both to the control plane about once a second from its ticking root context. Nothing
//! here is a host call per message; a decision the sampler drops costs a lookup and a count,
//! and nothing about it is formatted.

use proxy_wasm::hostcalls;
use proxy_wasm::traits::Context;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::time::Duration;
use weighstation_core::config::{Config, Protocol, Tenant};
use weighstation_core::identity::Identity;
use weighstation_core::limits::Reason;
use weighstation_core::report::{
    configured, consume_configured, limit_name, Decision, Kind, Outcome, Report, Reports, Sampler, Since, Suppressed,
    Tally, TenantUsage, TopClients, TopSubjects, ANSWER_SEND_SINCE, REPORT_PATH, REPORT_PERIOD_NS,
};

use crate::{discovery, state, vm_token};

/// Decisions kept while the control plane cannot be reached; older ones are dropped first.
const MAX_PENDING_DECISIONS: usize = 2_000;

/// Decisions in one report: the rest wait for the next, so a report stays small.
const MAX_REPORT_DECISIONS: usize = 500;

/// How long a report may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// One NATS message in this many has its subject counted (with this weight): the table is a
/// few string compares, too much for every message.
const SUBJECT_SAMPLE: u32 = 16;

#[derive(Default)]
struct Reporter {
    target: Option<Reports>,
    replica: String,
    /// Reports made, and decisions recorded, by this worker: the control plane drops a report
    /// or a decision it already has (one sent again after an answer was lost).
    reports: u64,
    decisions_made: u64,
    tally: Tally,
    sampler: Sampler,
    decisions: VecDeque<Decision>,
    /// Suppressed counts not yet delivered.
    suppressed: Vec<Suppressed>,
    /// Those of the report on its way: given back if it does not get through.
    sending: (Vec<Decision>, Vec<Suppressed>),
    /// Decisions dropped for want of a report getting through.
    dropped: u64,
    /// The counters of the report on its way, and of the last one a control plane counted:
    /// sent as `since` when a control plane asks (it has no report of this worker to count
    /// from), so that none of the worker's traffic goes uncounted.
    sending_counts: Option<(u64, Vec<TenantUsage>)>,
    counted: Option<(u64, Vec<TenantUsage>)>,
    send_since: bool,
    last_report: u64,
    pending: Option<(u32, u64)>,
    /// Whether the last report got through (logged on change).
    reaching: Option<bool>,
    /// Admitted NATS messages, for sampling their subjects.
    subject_tick: u32,
}

thread_local! {
    static REPORTER: RefCell<Reporter> = RefCell::new(Reporter::default());
    /// Whether reports go anywhere: read on the data path without borrowing the reporter.
    static ENABLED: Cell<bool> = const { Cell::new(false) };
}

/// After a configuration is installed: where to report, for this replica. True if reporting.
pub fn configure(replica: String) -> bool {
    let target = [Protocol::Nats, Protocol::Kafka]
        .into_iter()
        .find_map(|p| state::active(p).and_then(|c| c.reports.clone()));
    ENABLED.with(|e| e.set(target.is_some()));
    REPORTER.with(|r| {
        let mut r = r.borrow_mut();
        r.sampler
            .set_per_second(target.as_ref().map_or(0, |t| t.decisions_per_second));
        r.replica = replica;
        r.target = target;
        r.target.is_some()
    })
}

/// Whether this worker reports at all.
pub fn enabled() -> bool {
    ENABLED.with(Cell::get)
}

/// The slot of a tenant's usage (kept by its connections' metrics).
pub fn slot(protocol: Protocol, tenant: &str) -> usize {
    REPORTER.with(|r| r.borrow_mut().tally.slot(protocol, tenant))
}

/// Counts into a tenant's usage.
pub fn count(slot: usize, f: impl FnOnce(&mut TenantUsage)) {
    REPORTER.with(|r| {
        if let Some(u) = r.borrow_mut().tally.get_mut(slot) {
            f(u);
        }
    });
}

/// An admitted NATS message's subject, sampled into its tenant's busiest subjects.
pub fn nats_subject(slot: usize, subject: &[u8]) {
    if !enabled() {
        return;
    }
    REPORTER.with(|r| {
        let mut r = r.borrow_mut();
        r.subject_tick = r.subject_tick.wrapping_add(1);
        if r.subject_tick % SUBJECT_SAMPLE == 0 {
            if let Some(u) = r.tally.get_mut(slot) {
                u.subjects.add(subject, u64::from(SUBJECT_SAMPLE));
            }
        }
    });
}

/// The records an admitted Produce carried for one topic (a request is few enough to count
/// every one).
pub fn kafka_topic(slot: usize, topic: &[u8], records: u64) {
    count(slot, |u| u.subjects.add(topic, records));
}

/// Counts a refusal of `messages` of a client of the tenant at `slot` (its client limits).
pub fn client_refused(slot: usize, client: &[u8], messages: u64) {
    count(slot, |u| u.clients.refused(client, messages));
}

/// Counts `messages` (`bytes`) of a client of the tenant at `slot` that the gateway let through.
pub fn client_admitted(slot: usize, client: &[u8], messages: u64, bytes: u64) {
    count(slot, |u| u.clients.admitted(client, messages, bytes));
}

/// Where a decision was made: the configuration and tenant in force, the override whose limit
/// decided (None: the tenant's own), and who the client is.
pub struct Site<'a> {
    pub config: &'a Config,
    pub tenant: &'a Tenant,
    pub over: Option<usize>,
    pub identity: &'a Identity,
    pub now: u64,
}

/// What the client was told of a refusal.
pub struct Told<'a> {
    pub detail: &'a str,
    pub code: &'a str,
    pub retry_after_ms: u32,
}

/// A refusal: kept as an event if the sampler lets it through. The subject and what the limit
/// observed are only read and formatted then.
pub fn refused(
    site: &Site<'_>,
    reason: Reason,
    told: &Told<'_>,
    subject: impl FnOnce() -> Vec<u8>,
    observed: impl FnOnce() -> String,
) {
    if !keep(site, Kind::Refused(reason)) {
        return;
    }
    let outcome = Outcome::Refused {
        code: told.code.to_owned(),
        retry_after_ms: told.retry_after_ms,
    };
    record(site, reason, told.detail.to_owned(), outcome, subject(), observed());
}

/// A message admitted after `held_ns` held for `reason`: a decision if it waited the threshold.
pub fn delayed(site: &Site<'_>, reason: Reason, held_ns: u64, subject: impl FnOnce() -> Vec<u8>) {
    let threshold_ms = REPORTER.with(|r| r.borrow().target.as_ref().map_or(0, |t| t.delay_threshold_ms));
    let delayed_ms = held_ns / 1_000_000;
    if threshold_ms == 0 || delayed_ms < threshold_ms || !keep(site, Kind::Delayed) {
        return;
    }
    let detail = format!("held {delayed_ms} ms for its {} limit", limit_name(reason));
    let outcome = Outcome::Delayed { delayed_ms };
    record(
        site,
        reason,
        detail,
        outcome,
        subject(),
        format!("held {delayed_ms} ms"),
    );
}

/// A consumer throttled by its consume limit for `held_ms`: `how` says how (a Fetch or a pull
/// held at the gateway, a Fetch response's throttle_time_ms raised). Kept, as a delay is, if it
/// reached the threshold and the sampler lets it through.
pub fn consume_throttled(site: &Site<'_>, held_ms: u64, how: &str, subject: impl FnOnce() -> Vec<u8>) {
    let threshold_ms = REPORTER.with(|r| r.borrow().target.as_ref().map_or(0, |t| t.delay_threshold_ms));
    if threshold_ms == 0 || held_ms < threshold_ms || !keep(site, Kind::Delayed) {
        return;
    }
    let tenant = site.tenant;
    let over = site.over.and_then(|i| tenant.overrides.get(i)).map(|o| &o.limits);
    let configured = consume_configured(&tenant.limits, over);
    let detail = format!("{how} {held_ms} ms for its consume limit");
    let outcome = Outcome::Delayed { delayed_ms: held_ms };
    push(
        site,
        "consume",
        configured,
        detail,
        outcome,
        subject(),
        format!("in debt {held_ms} ms"),
    );
}

fn keep(site: &Site<'_>, kind: Kind) -> bool {
    enabled()
        && REPORTER.with(|r| {
            r.borrow_mut()
                .sampler
                .keep(site.config.protocol, &site.tenant.name, kind, site.now)
        })
}

fn record(site: &Site<'_>, reason: Reason, detail: String, outcome: Outcome, subject: Vec<u8>, observed: String) {
    let tenant = site.tenant;
    let over = site.over.and_then(|i| tenant.overrides.get(i)).map(|o| &o.limits);
    let configured = configured(reason, &tenant.limits, over);
    push(site, limit_name(reason), configured, detail, outcome, subject, observed);
}

fn push(
    site: &Site<'_>,
    limit: &'static str,
    configured: String,
    detail: String,
    outcome: Outcome,
    subject: Vec<u8>,
    observed: String,
) {
    let tenant = site.tenant;
    let mut decision = Decision {
        worker_seq: 0,
        at_ms: site.now / 1_000_000,
        protocol: site.config.protocol.as_str(),
        tenant: tenant.name.clone(),
        policy: tenant.policy.clone(),
        version: site.config.version.clone(),
        subject: String::from_utf8_lossy(&subject).into_owned(),
        peer: peer(),
        client: site.identity.label(),
        limit,
        configured,
        observed,
        outcome,
        detail,
    };
    REPORTER.with(|r| {
        let mut r = r.borrow_mut();
        r.decisions_made += 1;
        decision.worker_seq = r.decisions_made;
        if r.decisions.len() >= MAX_PENDING_DECISIONS {
            r.decisions.pop_front();
            r.dropped += 1;
        }
        r.decisions.push_back(decision);
    });
}

/// The client's address (the stream deciding is the effective context).
fn peer() -> String {
    hostcalls::get_property(vec!["source", "address"])
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// From the ticking root context: posts a report when one is due.
pub fn tick(root: &dyn Context, now: u64) {
    let request = REPORTER.with(|r| {
        let mut r = r.borrow_mut();
        let target = r.target.clone()?;
        if let Some((_, give_up_at)) = r.pending {
            if now < give_up_at {
                return None;
            }
            r.pending = None;
            r.not_sent();
        }
        if now < r.last_report.saturating_add(REPORT_PERIOD_NS) {
            return None;
        }
        r.last_report = now;
        r.reports += 1;
        let mut suppressed = std::mem::take(&mut r.suppressed);
        suppressed.extend(r.sampler.take_suppressed(now));
        let n = r.decisions.len().min(MAX_REPORT_DECISIONS);
        let decisions: Vec<Decision> = r.decisions.drain(..n).collect();
        let at_ms = now / 1_000_000;
        let since = r
            .counted
            .as_ref()
            .filter(|_| r.send_since)
            .map(|(at_ms, tenants)| Since { at_ms: *at_ms, tenants });
        let body = Report {
            replica: &r.replica,
            worker: vm_token::get(),
            seq: r.reports,
            at_ms,
            tenants: r.tally.tenants(),
            decisions: &decisions,
            suppressed: &suppressed,
            dropped: r.dropped,
            brokers: &discovery::seen(),
            since,
        }
        .to_json();
        // The counters alone (a period's subjects and clients are not counters).
        let counts = r
            .tally
            .tenants()
            .iter()
            .map(|t| TenantUsage {
                subjects: TopSubjects::default(),
                clients: TopClients::default(),
                ..t.clone()
            })
            .collect();
        r.sending_counts = Some((at_ms, counts));
        // Counts are cumulative, so a lost report loses none; its decisions and suppressed
        // counts go back if it is lost. Subjects are per report period (a lost one loses them).
        r.sending = (decisions, suppressed);
        r.tally.reported();
        Some((target, body))
    });
    let Some((target, body)) = request else { return };
    let headers = vec![
        (":method", "POST"),
        (":path", REPORT_PATH),
        (":authority", target.authority.as_str()),
        ("content-type", "application/json"),
    ];
    match root.dispatch_http_call(&target.cluster, headers, Some(&body), vec![], TIMEOUT) {
        Ok(token) => {
            let give_up_at = now + TIMEOUT.as_nanos() as u64 + 1_000_000_000;
            REPORTER.with(|r| r.borrow_mut().pending = Some((token, give_up_at)));
        }
        Err(e) => {
            REPORTER.with(|r| r.borrow_mut().not_sent());
            reaching(false, &format!("cannot call cluster {}: {e:?}", target.cluster));
        }
    }
}

impl Reporter {
    /// The report on its way was lost: its decisions wait for the next (oldest dropped first,
    /// beyond the bound), and so do its suppressed counts.
    fn not_sent(&mut self) {
        let (decisions, suppressed) = std::mem::take(&mut self.sending);
        for d in decisions.into_iter().rev() {
            self.decisions.push_front(d);
        }
        while self.decisions.len() > MAX_PENDING_DECISIONS {
            self.decisions.pop_front();
            self.dropped += 1;
        }
        self.suppressed.extend(suppressed);
    }
}

/// The control plane's answer to call `token`; false if the call was not a report.
pub fn answer(root: &dyn Context, token: u32) -> bool {
    let ours = REPORTER.with(|r| {
        let mut r = r.borrow_mut();
        let ours = r.pending.is_some_and(|(t, _)| t == token);
        if ours {
            r.pending = None;
        }
        ours
    });
    if ours {
        let status = root.get_http_call_response_header(":status").unwrap_or_default();
        let counted = status == "204";
        let ok = counted || status == ANSWER_SEND_SINCE;
        REPORTER.with(|r| {
            let mut r = r.borrow_mut();
            if ok {
                // Its decisions arrived either way; its counters only if counted.
                r.sending = Default::default();
            } else {
                r.not_sent();
            }
            let counts = r.sending_counts.take();
            if counted {
                r.counted = counts;
                r.send_since = false;
            } else if ok {
                r.send_since = true;
            }
        });
        reaching(ok, &format!("control plane answered {status}"));
    }
    ours
}

fn reaching(ok: bool, why: &str) {
    let changed = REPORTER.with(|r| r.borrow_mut().reaching.replace(ok) != Some(ok));
    if changed && !ok {
        log::warn!("weighstation: usage reports do not reach the control plane: {why}");
    } else if changed {
        log::info!("weighstation: usage reports reach the control plane");
    }
}
