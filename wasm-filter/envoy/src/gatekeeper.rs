//! Admission of one message for a tenant, the same for every protocol: size, then in-flight,
//! then rate (in-flight first because taking a slot can be undone and spending rate cannot);
//! then what the tenant's mode says to do when a limit is exhausted — count it (dryRun), refuse
//! it (reject), or hold the connection (delay) within the queue's bounds.

use std::cell::Cell;
use std::rc::Rc;
use weighstation_core::leases::{Refusal, Scope, SharedRate, SlotLease, SHARED_RATE_WORDS};
use weighstation_core::limits::{RateLimit, Reason};
use weighstation_core::quota::SATURATED_REPORT_PERIOD_NS;

use crate::clients::ClientBucket;
use crate::keys::{RateKey, SlotKey};
use crate::tenancy::Attributed;
use crate::{reports, shared, waiters};

/// How often a message held for in-flight capacity is retried when nothing wakes it sooner.
const INFLIGHT_POLL_NS: u64 = 5_000_000;

/// In-flight counters a request holds until its reply (or timeout, or the connection's close).
/// Only bounded counters are kept in shared data, taken in blocks by each worker
/// (weighstation_core::leases::SlotLease); the in-flight gauge is counted either way. A limit
/// set on a reload counts the requests admitted after it.
#[derive(Debug, Clone)]
pub struct InFlightSlot {
    /// The tenant's, the override's and the client's.
    taken: [Option<(SlotKey, u64)>; 3],
}

impl InFlightSlot {
    pub fn release(&self) {
        for (slots, limit) in self.taken.iter().flatten() {
            let surplus = slots.lease.borrow_mut().put_back(*limit);
            shared::give_back(&slots.key, surplus);
        }
    }

    /// A forwarded request is done (answered, timed out or its connection closed): the gauge
    /// drops before the slot goes back (see TenantMetrics::in_flight_released), then the
    /// tenant's waiters on this worker may take it.
    pub fn finished(&self, who: Option<&Attributed>) {
        if let Some(who) = who {
            who.metrics.in_flight_released();
        }
        self.release();
        if let Some(who) = who {
            waiters::capacity_freed(who.name());
        }
    }
}

/// Takes one of `limit` in-flight slots: this worker's idle one, or one from the shared count
/// with a block more for this worker.
fn take_slot(slots: &SlotKey, limit: u64) -> bool {
    let mut lease = slots.lease.borrow_mut();
    if lease.take() {
        return true;
    }
    let granted = Cell::new(0);
    let (_, stored) = shared::update::<1>(&slots.key, |[n]| {
        let (next, taken) = SlotLease::take_shared(limit, n)?;
        granted.set(taken);
        Some([next])
    });
    if stored {
        // Stored without a grant: shared data failed open, and so does the limit.
        lease.granted(granted.get().max(1));
    }
    stored
}

/// One message to decide.
pub struct Ask<'a> {
    pub who: &'a Attributed,
    /// The most specific override for the message's subject or topic.
    pub over: Option<usize>,
    /// The bucket of the client it comes from, if its tenant limits its clients.
    pub client: Option<&'a ClientBucket>,
    /// That client's own name (a named entry's bucket may be shared by several), for the usage
    /// report.
    pub client_name: &'a [u8],
    pub bytes: u64,
    /// Messages in the batch (Kafka); 1 for NATS.
    pub messages: u64,
    /// The message awaits a reply and counts against inFlight.
    pub awaits_reply: bool,
    pub now: u64,
    /// The stream context deciding, for hold registration.
    pub me: u32,
    /// Whether `bytes` is one message measured against maxMessageBytes (NATS); Kafka checks
    /// each record batch itself.
    pub check_size: bool,
    /// Rate already set aside for part of the message (a Kafka retry, see
    /// weighstation_core::kafka::Retries): not charged again.
    pub prepaid: Prepaid,
}

/// Messages and bytes whose rate was taken before.
#[derive(Debug, Default, Clone, Copy)]
pub struct Prepaid {
    pub messages: u64,
    pub bytes: u64,
}

#[derive(Debug)]
pub enum Admit {
    /// Admitted, with its in-flight slot and, if it was held first, for how long (ns).
    Forward(Option<InFlightSlot>, Option<u64>),
    Hold,
    /// Refused: the reason, a detail reading "<limit> limit of tenant <t>: …", when a retry
    /// could succeed (ms), and the override whose limit refused (None: the tenant's own).
    Refuse(Reason, String, u32, Option<usize>),
}

/// Per connection: when its held message started waiting, and how much of its wait was then
/// pacing (see `hold`).
#[derive(Debug, Default)]
pub struct Held {
    since: Option<u64>,
    paced: u64,
    /// The limit the message was held for, and the override it belongs to (None: the tenant's);
    /// kept after the hold ends, for the decision log.
    reason: Option<(Reason, Option<usize>)>,
    /// The client's count of held messages, while the message holds a place in it.
    client_queue: Option<Rc<str>>,
}

impl Held {
    /// The limit the last held message waited for, and its override.
    pub fn reason(&self) -> Option<(Reason, Option<usize>)> {
        self.reason
    }

    /// Gives back the queue place of a held message (it was admitted, refused or its connection
    /// closed).
    pub fn end(&mut self, who: &Attributed, me: u32) -> Option<u64> {
        let since = self.since.take()?;
        shared::release(&who.keys.queue);
        if let Some(key) = self.client_queue.take() {
            shared::release(&key);
        }
        who.metrics.queue_depth(-1);
        waiters::release(me);
        Some(since)
    }
}

enum Check {
    Admit(Option<InFlightSlot>),
    /// Over maxMessageBytes: the detail, and the override whose bound it is (None: the tenant's).
    TooLarge(String, Option<usize>),
    Exhausted {
        reason: Reason,
        /// The override whose limit is exhausted (None: the tenant's own).
        by: Option<usize>,
        retry_ns: Option<u64>,
        /// The part of the wait that is pacing, not queueing (see Gcra::paced_ns).
        paced_ns: u64,
        detail: String,
    },
}

fn rate_detail(tenant: &str, client: Option<&str>, limit: &RateLimit, mps: Option<u64>, bps: Option<u64>) -> String {
    let mut parts = Vec::new();
    if let (Some(_), Some(m)) = (limit.messages, mps) {
        parts.push(format!("{m} messages/s"));
    }
    if let (Some(_), Some(b)) = (limit.bytes, bps) {
        parts.push(format!("{b} bytes/s"));
    }
    match client {
        Some(c) => format!("rate limit of {c} of tenant {tenant}: {}", parts.join(" and ")),
        None => format!("rate limit of tenant {tenant}: {}", parts.join(" and ")),
    }
}

/// One rate limit a message must pass: the limit, its shared-data key, the configured
/// messages/s and bytes/s, the override it belongs to (None: the tenant's or a client's), and
/// the client bucket's name (None: the tenant's or an override's).
type Bucket<'a> = (
    &'a RateLimit,
    &'a RateKey,
    Option<u64>,
    Option<u64>,
    Option<usize>,
    Option<&'a str>,
);

/// The rate limits a message must pass, most specific first: its client's, its override's,
/// then its tenant's.
fn rate_buckets<'a>(ask: &Ask<'a>) -> impl Iterator<Item = Bucket<'a>> {
    let who = ask.who;
    let (tenant, plan) = (who.tenant(), who.plan());
    let over = ask.over.and_then(|i| {
        Some((
            plan?.overrides.get(i)?,
            who.keys.overrides.get(i)?,
            tenant?.overrides.get(i)?,
        ))
    });
    let overridden = over.filter(|(o, _, _)| !o.rate.is_unlimited()).map(|(o, k, raw)| {
        (
            &o.rate,
            &k.rate,
            raw.limits.messages_per_second,
            raw.limits.bytes_per_second,
            ask.over,
            None,
        )
    });
    let tenant_wide = tenant.zip(plan).filter(|(_, p)| !p.rate.is_unlimited()).map(|(t, p)| {
        (
            &p.rate,
            &who.keys.rate,
            t.limits.messages_per_second,
            t.limits.bytes_per_second,
            None,
            None,
        )
    });
    let client = ask.client.filter(|c| !c.limit.is_unlimited()).map(|c| {
        (
            &c.limit,
            &c.rate,
            c.messages_per_second,
            c.bytes_per_second,
            None,
            Some(c.label.as_str()),
        )
    });
    client.into_iter().chain(overridden).chain(tenant_wide)
}

/// Sets aside, in every rate bucket the message passes, the rate of `messages` and `bytes` it
/// was just refused for, so that its retry can spend it (weighstation_core::kafka::Retries):
/// when that can be, or None, taking nothing, if it is beyond `horizon_ns`.
pub fn reserve(ask: &Ask<'_>, messages: u64, bytes: u64, horizon_ns: u64) -> Option<u64> {
    let mut ready_at = ask.now;
    let mut taken: Vec<(&RateLimit, &RateKey)> = Vec::new();
    for (limit, rate, ..) in rate_buckets(ask) {
        let ready = Cell::new(None);
        shared::update::<SHARED_RATE_WORDS>(&rate.key, |w| {
            let (next, at) = SharedRate::decode(w).reserve(limit, rate.scope, ask.now, messages, bytes, horizon_ns)?;
            ready.set(Some(at));
            Some(next.encode())
        });
        match ready.get() {
            Some(at) => {
                ready_at = ready_at.max(at);
                taken.push((limit, rate));
            }
            None => {
                for (limit, rate) in taken {
                    shared::update::<SHARED_RATE_WORDS>(&rate.key, |w| {
                        Some(
                            SharedRate::decode(w)
                                .refund(limit, rate.scope, ask.now, messages, bytes)
                                .encode(),
                        )
                    });
                }
                return None;
            }
        }
    }
    Some(ready_at)
}

/// Spends a message's rate from this worker's lease, or renews the lease from the shared
/// bucket with one compare-and-swap (weighstation_core::leases::RateLease).
/// Whether the message was charged (false: shared data failed open, nothing was taken).
fn spend_rate(limit: &RateLimit, rate: &RateKey, now: u64, messages: u64, bytes: u64) -> Result<bool, Refusal> {
    let mut lease = rate.lease.borrow_mut();
    if lease.spend(limit, now, messages, bytes) {
        return Ok(true);
    }
    let outcome = Cell::new(None);
    let marked = Cell::new(false);
    // A held message of a global tenant is looked at again within this long (see `hold`), and
    // is counted as waiting until then, not for all its share predicts: summed over its looks,
    // its wait is the time it was held.
    let waited = |r: &Refusal| r.wait_ns.min(SATURATED_REPORT_PERIOD_NS);
    let (_, stored) = shared::update::<SHARED_RATE_WORDS>(&rate.key, |w| {
        let renewal = lease.renew(limit, rate.scope, w, now, messages, bytes);
        outcome.set(Some(renewal.map(|(_, grant)| grant)));
        match renewal {
            Ok((next, _)) => Some(next),
            // The quota service divides a global limit by what each replica wanted: the same
            // compare-and-swap counts the refusal (at most every 100 ms; the lease keeps it
            // meanwhile).
            Err(refusal) if rate.scope != Scope::PerGateway => {
                let mark = lease.refusal(w, now, messages, bytes, waited(&refusal));
                marked.set(mark.is_some());
                mark
            }
            Err(_) => None,
        }
    });
    match outcome.get() {
        Some(Ok(grant)) if stored => {
            lease.renewed(grant, now, messages, bytes);
            Ok(true)
        }
        Some(Err(refusal)) if !stored || marked.get() => {
            if marked.get() {
                lease.refusal_stored();
            } else if rate.scope != Scope::PerGateway {
                lease.refusal_kept(messages, bytes, waited(&refusal));
            }
            Err(refusal)
        }
        // Shared data failed open (see shared::update): so does the limit.
        _ => Ok(false),
    }
}

fn check(ask: &Ask<'_>) -> Check {
    let who = ask.who;
    let (Some(tenant), Some(plan)) = (who.tenant(), who.plan()) else {
        return Check::Admit(None);
    };
    let name = &tenant.name;
    let over = ask.over.and_then(|i| {
        Some((
            plan.overrides.get(i)?,
            who.keys.overrides.get(i)?,
            tenant.overrides.get(i)?,
        ))
    });

    let by_override = over.and_then(|(o, _, _)| o.max_message_bytes).map(|m| (m, ask.over));
    let max = by_override.or(tenant.limits.max_message_bytes.map(|m| (m, None)));
    if let Some((max, by)) = max.filter(|(m, _)| ask.check_size && ask.bytes > *m) {
        return Check::TooLarge(
            format!(
                "maxMessageBytes limit of tenant {name}: {} bytes is over {max}",
                ask.bytes
            ),
            by,
        );
    }

    let mut slot = None;
    if ask.awaits_reply {
        let inflight_exhausted = |limit: u64, by: Option<usize>, client: Option<&str>| Check::Exhausted {
            reason: Reason::InFlight,
            by,
            retry_ns: None,
            paced_ns: 0,
            detail: match client {
                Some(c) => format!("inFlight limit of {c} of tenant {name}: {limit} requests awaiting a reply"),
                None => format!("inFlight limit of tenant {name}: {limit} requests awaiting a reply"),
            },
        };
        let mut taken = InFlightSlot {
            taken: [None, None, None],
        };
        let bounds = [
            tenant.limits.in_flight.map(|l| (&who.keys.in_flight, l)),
            over.and_then(|(o, k, _)| Some((&k.in_flight, o.in_flight?))),
            ask.client.and_then(|c| c.in_flight.as_ref()).map(|(k, n)| (k, *n)),
        ];
        for (i, bound) in bounds.into_iter().enumerate() {
            let Some((slots, limit)) = bound else { continue };
            if !take_slot(slots, limit) {
                taken.release();
                let by = if i == 1 { ask.over } else { None };
                let client = ask.client.filter(|_| i == 2).map(|c| c.label.as_str());
                return inflight_exhausted(limit, by, client);
            }
            taken.taken[i] = Some((slots.clone(), limit));
        }
        slot = Some(taken);
    }

    let messages = ask.messages.saturating_sub(ask.prepaid.messages);
    let bytes = ask.bytes.saturating_sub(ask.prepaid.bytes);
    if messages == 0 && bytes == 0 {
        return Check::Admit(slot);
    }
    let mut spent: [Option<(&RateLimit, &RateKey)>; 3] = [None, None, None];
    for (i, (limit, rate, mps, bps, by, client)) in rate_buckets(ask).enumerate() {
        let charged = spend_rate(limit, rate, ask.now, messages, bytes);
        if let Err(refusal) = charged {
            if let Some(s) = &slot {
                s.release();
            }
            // Refused by the tenant's rate after its client's or override's admitted it: their
            // buckets must not pay for a message that was not sent.
            for (limit, rate) in spent.into_iter().flatten() {
                rate.lease.borrow_mut().unspend(limit, messages, bytes);
            }
            return Check::Exhausted {
                reason: Reason::Rate,
                by,
                retry_ns: Some(refusal.wait_ns),
                paced_ns: refusal.paced_ns,
                detail: rate_detail(name, client, limit, mps, bps),
            };
        }
        if let (Ok(true), Some(cell)) = (charged, spent.get_mut(i)) {
            *cell = Some((limit, rate));
        }
    }
    Check::Admit(slot)
}

/// Decides one message, applying the tenant's mode and onLimit.
pub fn admit(ask: &Ask<'_>, held: &mut Held) -> Admit {
    let who = ask.who;
    let Some(tenant) = who.tenant() else {
        return Admit::Forward(None, None);
    };
    let m = &who.metrics;
    match check(ask) {
        Check::Admit(slot) => {
            let delayed = held.end(who, ask.me).map(|since| ask.now.saturating_sub(since));
            if let Some(ns) = delayed {
                m.delayed(ns);
            }
            accepted(ask);
            Admit::Forward(slot, delayed)
        }
        Check::TooLarge(..) if tenant.dry_run => {
            m.would_refuse(Reason::Size, ask.messages);
            accepted(ask);
            Admit::Forward(None, None)
        }
        Check::TooLarge(detail, by) => {
            refused(ask, Reason::Size);
            Admit::Refuse(Reason::Size, detail, 0, by)
        }
        Check::Exhausted { reason, .. } if tenant.dry_run => {
            m.would_refuse(reason, ask.messages);
            accepted(ask);
            Admit::Forward(None, None)
        }
        Check::Exhausted {
            reason,
            by,
            detail,
            retry_ns,
            ..
        } if tenant.reject => {
            refused(ask, reason);
            Admit::Refuse(reason, detail, retry_ms(retry_ns), by)
        }
        Check::Exhausted {
            reason,
            by,
            retry_ns,
            paced_ns,
            detail,
        } => {
            held.reason = Some((reason, by));
            hold(ask, held, retry_ns, paced_ns, detail)
        }
    }
}

/// onLimit: delay. The first held message of a connection takes a place in the tenant's queue;
/// it is refused when the queue is full or when it could not be admitted within maxWait. A
/// Kafka batch of more records than the burst waits for a full bucket and leaves it in debt; the
/// part of a message's wait that was such pacing when it was first held (Gcra::paced_ns) extends
/// its maxWait — so that a stream of such batches, each waiting for the one before, can be held
/// whatever maxWait.
fn hold(ask: &Ask<'_>, held: &mut Held, retry_ns: Option<u64>, paced_ns: u64, detail: String) -> Admit {
    let who = ask.who;
    let Some(tenant) = who.tenant() else {
        return Admit::Forward(None, None);
    };
    let name = &tenant.name;
    let max_wait_ms = tenant.limits.queue_max_wait_ms;
    let (since, paced) = match held.since {
        Some(s) => (s, held.paced),
        None => {
            // The client's place first: a client already holding its share never takes the
            // tenant's last place, even for a moment (another worker's client would be refused).
            let client_queue = ask.client.and_then(|c| c.queue.as_ref());
            if let Some((key, max)) = client_queue {
                if !shared::acquire(key, Some(*max)) {
                    refused(ask, Reason::Queue);
                    let client = ask.client.map_or("", |c| c.label.as_str());
                    let text =
                        format!("queue limit of {client} of tenant {name}: {max} messages already held ({detail})");
                    return Admit::Refuse(Reason::Queue, text, retry_ms(retry_ns), None);
                }
            }
            if !shared::acquire(&who.keys.queue, tenant.limits.queue_max_messages) {
                if let Some((key, _)) = client_queue {
                    shared::release(key);
                }
                refused(ask, Reason::Queue);
                let max = tenant.limits.queue_max_messages.unwrap_or_default();
                let text = format!("queue limit of tenant {name}: {max} messages already held ({detail})");
                return Admit::Refuse(Reason::Queue, text, retry_ms(retry_ns), None);
            }
            held.client_queue = client_queue.map(|(key, _)| key.clone());
            who.metrics.queue_depth(1);
            held.since = Some(ask.now);
            held.paced = paced_ns;
            (ask.now, paced_ns)
        }
    };
    let deadline = max_wait_ms.map_or(u64::MAX, |ms| {
        since.saturating_add(ms.saturating_mul(1_000_000)).saturating_add(paced)
    });
    let ready_at = ask.now.saturating_add(retry_ns.unwrap_or(INFLIGHT_POLL_NS));
    if ask.now >= deadline || (retry_ns.is_some() && ready_at > deadline) {
        held.end(who, ask.me);
        refused(ask, Reason::Queue);
        let ms = max_wait_ms.unwrap_or_default();
        let text = format!("queue limit of tenant {name}: not admitted within maxWait {ms}ms ({detail})");
        return Admit::Refuse(Reason::Queue, text, retry_ms(retry_ns), None);
    }
    // A global tenant's share can grow at any report of this replica's, and only a message
    // looked at again counts as waiting in the next report (its demand): one parked until a wait
    // computed from a share near zero would keep its replica's demand, and so its share, there.
    let wake_at = if tenant.global {
        ready_at.min(ask.now.saturating_add(SATURATED_REPORT_PERIOD_NS))
    } else {
        ready_at
    };
    waiters::hold(ask.me, name, since, wake_at.min(deadline));
    Admit::Hold
}

/// Counts an admitted message for its tenant and, in the usage report, for its client.
fn accepted(ask: &Ask<'_>) {
    let m = &ask.who.metrics;
    m.accepted(ask.messages, ask.bytes);
    if ask.client.is_some() {
        reports::client_admitted(m.usage_slot(), ask.client_name, ask.messages, ask.bytes);
    }
}

/// Counts a refused message for its tenant and, in the usage report, for its client.
fn refused(ask: &Ask<'_>, reason: Reason) {
    let m = &ask.who.metrics;
    m.refused(reason, ask.messages);
    if ask.client.is_some() {
        reports::client_refused(m.usage_slot(), ask.client_name, ask.messages);
    }
}

/// When a refused message could be retried: the rate's own wait, else one poll interval.
fn retry_ms(retry_ns: Option<u64>) -> u32 {
    let ns = retry_ns.unwrap_or(INFLIGHT_POLL_NS);
    u32::try_from(ns.div_ceil(1_000_000)).unwrap_or(u32::MAX)
}
