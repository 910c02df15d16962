//! One NATS client connection: the core [`Session`] does the protocol, this [`Gate`] decides with
//! the tenant's limits (shared across workers) and keeps the connection's in-flight requests.

use std::collections::HashMap;
use weighstation_core::backlog::{BacklogPolicy, Standing};
use weighstation_core::carry::{Carry, Plan};
use weighstation_core::config::Protocol;
use weighstation_core::identity::{Authenticated, NatsCredentials};
use weighstation_core::limits::Reason;
use weighstation_core::metrics::UNREADABLE_INFO_METRIC;
use weighstation_core::nats::{is_pull, pull_within, Delivered, Deliveries, Gate, Publish, Session, Verdict};
use weighstation_core::source::Source;

use crate::backlog::BacklogWait;
use crate::clock::now_ns;
use crate::connection::{self, Connection};
use crate::gatekeeper::{self, Admit, Ask, Held, InFlightSlot, Prepaid};
use crate::tenancy::Attribution;
use crate::{metrics, reports, state, trust, waiters};
use weighstation_core::report::observed;

mod authz;
mod deliveries;

use deliveries::Pull;

/// A request whose reply never passes this connection (sent elsewhere, or lost) gives its
/// in-flight slot back after this long.
const IN_FLIGHT_TIMEOUT_NS: u64 = 10_000_000_000;

struct Pending {
    slot: InFlightSlot,
    deadline: u64,
}

struct Conn {
    id: u32,
    who: Attribution,
    held: Held,
    /// In-flight requests by reply subject.
    pending: HashMap<Box<[u8]>, Pending>,
    next_expiry: u64,
    /// The read side: the connection's pulls and the current read's deliveries.
    deliveries: Deliveries,
    /// Since when a pull has been held for the consume debt.
    pull_held: Option<u64>,
    /// Until when the tenant's consume buckets were in debt when this connection last charged.
    debt_until: u64,
    /// This read's first core delivery checked the debt.
    debt_checked: bool,
    /// A core delivery found the subscriber a slow consumer: the connection ends.
    slow_consumer: bool,
    /// The connection's recent publish permission decisions (authz.rs).
    decisions: weighstation_core::nats::authz::Decisions,
}

impl Conn {
    fn release_pending(&mut self, reply: &[u8]) {
        if let Some(p) = self.pending.remove(reply) {
            p.slot.finished(self.who.current());
        }
    }

    fn expire_pending(&mut self, now: u64) {
        if self.pending.is_empty() || now < self.next_expiry {
            return;
        }
        let expired: Vec<Box<[u8]>> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for reply in expired {
            self.release_pending(&reply);
        }
        self.next_expiry = now + 1_000_000_000;
    }
}

struct NatsGate<'a> {
    conn: &'a mut Conn,
    /// Envoy's clock, read once a decision needs it: a read that is all payload asks nothing
    /// of the host.
    now: Option<u64>,
}

impl NatsGate<'_> {
    fn now(&mut self) -> u64 {
        *self.now.get_or_insert_with(now_ns)
    }
}

impl Gate for NatsGate<'_> {
    fn authenticated(&mut self, credentials: NatsCredentials) -> Result<(), String> {
        let who = &mut self.conn.who;
        let result = who
            .authenticated(Authenticated::Nats(credentials))
            .and_then(|()| who.client_connection(None));
        if let Err(why) = &result {
            log::info!("weighstation: nats connection refused: {why}");
        }
        result
    }

    fn authentication_failed(&mut self) {
        trust::authentication_failed(Protocol::Nats);
    }

    fn proxy_signature(&self, nonce: &str) -> Option<String> {
        Some(trust::proxy_key()?.sign(nonce.as_bytes()))
    }

    fn publish(&mut self, p: &Publish<'_>) -> Verdict {
        let now = self.now();
        let conn = &mut *self.conn;
        conn.who.ensure_attributed();
        if let Some(refused) = conn.may_not_publish(p.subject, now) {
            return refused;
        }
        let pull = is_pull(p.subject);
        let mut most = None;
        if pull {
            match conn.pull(p, now) {
                Pull::Hold => return Verdict::Hold,
                Pull::Go(m) => most = m,
            }
        }
        let client = conn.who.client_bucket(None, now);
        let Some(who) = conn.who.current() else {
            return Verdict::Forward;
        };
        let over = who.plan().and_then(|plan| plan.override_for(Protocol::Nats, p.subject));
        let ask = Ask {
            who,
            over,
            client: client.as_deref(),
            client_name: conn.who.client_name(None),
            bytes: p.total_bytes as u64,
            messages: 1,
            // A pull is answered by a stream of messages on the consumer's subscription, not by
            // one reply on its reply subject: limits.consume bounds it, not inFlight.
            awaits_reply: p.reply.is_some() && !pull,
            now,
            me: conn.id,
            check_size: true,
            prepaid: Prepaid::default(),
        };
        let outcome = gatekeeper::admit(&ask, &mut conn.held);
        let log = |by: Option<usize>, decision: &dyn Fn(&reports::Site<'_>)| {
            if let Some(site) = conn.who.site(by, now) {
                decision(&site);
            }
        };
        let subject = || p.subject.to_vec();
        match outcome {
            Admit::Forward(slot, delayed) => {
                if let (Some(ns), Some((reason, by))) = (delayed, conn.held.reason()) {
                    log(by, &|site| reports::delayed(site, reason, ns, subject));
                }
                reports::nats_subject(who.metrics.usage_slot(), p.subject);
                if let (Some(slot), Some(reply)) = (slot, p.reply) {
                    who.metrics.in_flight(1);
                    let deadline = now + IN_FLIGHT_TIMEOUT_NS;
                    if let Some(old) = conn.pending.insert(reply.into(), Pending { slot, deadline }) {
                        // The same reply subject twice: the earlier request's slot goes back now.
                        old.slot.release();
                        who.metrics.in_flight(-1);
                    }
                }
                if let Some(pull) = most.and_then(|m| pull_within(p, m)) {
                    return Verdict::Rewrite(pull);
                }
                Verdict::Forward
            }
            Admit::Hold => Verdict::Hold,
            Admit::Refuse(Reason::Size, detail, _, by) => {
                log::info!("weighstation: nats {detail}: closing as nats-server would");
                let told = reports::Told {
                    detail: &detail,
                    code: "-ERR 'Maximum Payload Violation', connection closed",
                    retry_after_ms: 0,
                };
                log(by, &|site| {
                    reports::refused(site, Reason::Size, &told, subject, || {
                        observed(Reason::Size, ask.bytes, 0, "")
                    })
                });
                Verdict::Close
            }
            Admit::Refuse(reason, detail, retry_ms, by) => {
                let told = reports::Told {
                    detail: &detail,
                    code: "-ERR 'Permissions Violation'",
                    retry_after_ms: retry_ms,
                };
                log(by, &|site| {
                    reports::refused(site, reason, &told, subject, || observed(reason, 0, retry_ms, &detail))
                });
                let subject = String::from_utf8_lossy(p.subject);
                Verdict::Refuse(format!("Permissions Violation for Publish to \"{subject}\" ({detail})"))
            }
        }
    }

    fn subscribe(&mut self, subject: &[u8]) -> Verdict {
        let now = self.now();
        self.conn.who.ensure_attributed();
        self.conn.may_not_subscribe(subject, now).unwrap_or(Verdict::Forward)
    }

    fn delivered(&mut self, d: &Delivered<'_>) -> bool {
        if !self.conn.pending.is_empty() {
            self.conn.release_pending(d.subject);
        }
        self.conn.delivered(d, &mut self.now)
    }

    /// dryRun refuses nothing, so its limit is not advertised either (nats.go would enforce it).
    fn max_payload(&self) -> Option<u64> {
        let tenant = self.conn.who.current()?.tenant()?;
        tenant.limits.max_message_bytes.filter(|_| !tenant.dry_run)
    }
}

/// NATS decides a message on its control line (at most 4096 bytes) and streams the payload, so
/// nothing needs a large carry; a small one keeps the hidden backlog behind a held message small.
const NATS_CARRY_LIMIT: usize = 64 << 10;
type NatsCarry = Carry<NATS_CARRY_LIMIT>;

/// A NATS connection's state.
pub struct State {
    session: Session,
    conn: Conn,
    carry: NatsCarry,
    /// The connection's first bytes, either way, were seen.
    started: bool,
    /// The server sent an INFO the rewriter could not read: the connection ends.
    info_refused: bool,
    /// What the gateway may owe the client (weighstation_core::backlog), from the configuration.
    backlog: BacklogPolicy,
    backlog_wait: BacklogWait,
}

impl State {
    /// The configuration's backlog bound and deadline, at the start and after a reload.
    fn read_backlog_policy(&mut self) {
        if let Some(config) = state::active(Protocol::Nats) {
            self.backlog = config.backlog;
            self.session.set_backlog_limit(config.backlog.max_bytes);
        }
    }

    fn gate(&mut self) -> (&mut Session, NatsGate<'_>) {
        let now = (!self.conn.pending.is_empty()).then(now_ns);
        if let Some(now) = now {
            self.conn.expire_pending(now);
        }
        if self.conn.who.refresh() {
            self.read_backlog_policy();
            let gate = NatsGate {
                conn: &mut self.conn,
                now,
            };
            self.session.limit_changed(&gate);
        }
        (
            &mut self.session,
            NatsGate {
                conn: &mut self.conn,
                now,
            },
        )
    }

    /// What Envoy knows of the connection once its TLS handshake, if any, is done (the broker
    /// is dialled only then, so the server's first bytes come after it): the verified client
    /// certificate, whether the client speaks TLS, and which gateway listener it reached from
    /// where, which its INFOs must say.
    fn start(&mut self) {
        if !std::mem::replace(&mut self.started, true) {
            self.read_backlog_policy();
            self.conn.who.read_certificate();
            let tls = trust::client_tls();
            self.session.client_tls(tls);
            let chain = trust::filter_chain();
            if !tls && trust::plaintext_on_tls_first_listener(chain.as_deref()) {
                self.session.require_tls_first();
            }
            let listener = chain.and_then(|c| state::active(Protocol::Nats)?.nats_listener(&c));
            self.session.client_reached(listener, trust::client_ip());
        }
    }

    /// Scans what Envoy holds, behind any carried bytes (see weighstation_core::carry).
    fn client_data(&mut self, envoy: &mut dyn Source) -> Plan {
        self.start();
        let mut carry = std::mem::take(&mut self.carry);
        let scanned = carry.scan(envoy, |buf| {
            let (session, mut gate) = self.gate();
            Ok::<_, std::convert::Infallible>(session.client_data(buf, &mut gate))
        });
        self.carry = carry;
        let Ok((plan, forwarded)) = scanned;
        self.session.forwarded(forwarded);
        plan
    }

    /// Holds a client the gateway owes too much, or ends it as a slow consumer (Err).
    fn check_backlog(&mut self, held: bool) -> Result<(), &'static str> {
        // The clock is read only past the bound: a read costs no host call otherwise.
        let standing = match self.session.backlogged() {
            false => Standing::Open,
            true => self.session.backlog_standing(now_ns(), self.backlog.deadline_ns()),
        };
        let who = &self.conn.who;
        self.backlog_wait
            .apply(standing, held, self.conn.id, who, who.client_name(None), Protocol::Nats)
    }

    /// Gives back everything the connection holds: in-flight slots, its queue place, its place
    /// in the tenant's connection count. Safe to call twice.
    fn close(&mut self) {
        let c = &mut self.conn;
        let replies: Vec<Box<[u8]>> = c.pending.keys().cloned().collect();
        for r in replies {
            c.release_pending(&r);
        }
        if let Some(who) = c.who.current() {
            c.held.end(who, c.id);
        }
        waiters::forget(c.id);
        c.who.closed();
    }
}

/// A NATS connection's stream context.
pub fn connection(context_id: u32) -> Connection<State> {
    Connection::new(
        context_id,
        State {
            session: {
                let mut session = Session::default();
                session.set_carry_limit(NATS_CARRY_LIMIT);
                session
            },
            conn: Conn {
                id: context_id,
                who: Attribution::new(Protocol::Nats),
                held: Held::default(),
                pending: HashMap::new(),
                next_expiry: 0,
                deliveries: Deliveries::default(),
                pull_held: None,
                debt_until: 0,
                debt_checked: false,
                slow_consumer: false,
                decisions: Default::default(),
            },
            carry: NatsCarry::default(),
            started: false,
            info_refused: false,
            backlog: BacklogPolicy::default(),
            backlog_wait: BacklogWait::default(),
        },
    )
}

impl connection::Protocol for State {
    fn client_data(&mut self, envoy: &mut dyn Source) -> Result<Plan, &'static str> {
        let plan = State::client_data(self, envoy);
        self.check_backlog(matches!(plan, Plan::Hold { .. }))?;
        Ok(plan)
    }

    fn server_data(&mut self, buf: &mut dyn Source) -> Option<Vec<u8>> {
        self.start();
        let (session, mut gate) = self.gate();
        let replaced = session.server_data(buf, &mut gate);
        self.conn.deliveries_done();
        if let Some(why) = self.session.unreadable_info().filter(|_| !self.info_refused) {
            self.info_refused = true;
            log::warn!("weighstation: closing nats connection: {}", why.reason());
            metrics::count(UNREADABLE_INFO_METRIC, 1);
        }
        replaced
    }

    fn ended(&self) -> bool {
        self.conn.slow_consumer || self.info_refused
    }

    fn release_held(&mut self) -> bool {
        self.session.release_held()
    }

    fn close(&mut self) {
        State::close(self);
    }
}
