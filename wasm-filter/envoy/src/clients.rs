//! The bucket of the client a message comes from (weighstation_core::clients): its named
//! entry's, a slot of its tenant's pool, or the pool's overflow bucket. A connection keeps its
//! client's bucket ([`ClientSeat`]) and looks again only when the client's name or the
//! configuration changes, and — for a pool slot — every [`CHECK_NS`], since a slot whose bucket
//! refilled may have gone to another client.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use weighstation_core::clients::pool::{self, Slot};
use weighstation_core::clients::{client_hash, BucketPlan, ClientsPlan};
use weighstation_core::consume::ConsumeLimit;
use weighstation_core::leases::{Scope, SharedRate, SHARED_RATE_WORDS};
use weighstation_core::limits::{RateLimit, Reason};

use crate::keys::{self, RateKey, SlotKey};
use crate::tenancy::Attributed;
use crate::{metrics, reports, shared};

/// How often a connection makes sure its pool slot is still its client's, and an overflowing
/// client looks for a slot again.
const CHECK_NS: u64 = 100_000_000;

/// This worker's clients' pool slots, looked up when a connection's client changes; emptied
/// when full, so a client.id per request cannot grow it.
const WORKER_CACHE: usize = 4096;

/// A client name in a refusal is cut to this many bytes (a Kafka client.id may be 32 KiB).
const LABEL_BYTES: usize = 255;

thread_local! {
    static SLOTS: RefCell<HashMap<(u64, u64), Rc<ClientBucket>>> = RefCell::new(HashMap::new());
}

/// One client bucket: its limits, where they are kept, and whom they are for.
#[derive(Debug)]
pub struct ClientBucket {
    pub rate: RateKey,
    /// Unlimited when the client has no rate.
    pub limit: RateLimit,
    pub messages_per_second: Option<u64>,
    pub bytes_per_second: Option<u64>,
    /// Its in-flight count and bound.
    pub in_flight: Option<(SlotKey, u64)>,
    /// Its count of held messages and bound.
    pub queue: Option<(Rc<str>, u64)>,
    /// Its count of connections and bound.
    pub connections: Option<(Rc<str>, u64)>,
    /// What its consumers may receive: bytes, and NATS deliveries (weighstation_core::consume).
    pub consume: Option<(ConsumeLimit, Rc<str>)>,
    pub consume_messages: Option<(ConsumeLimit, Rc<str>)>,
    /// Names it in refusals: `client billing-a`.
    pub label: String,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Named,
    /// A pool slot: its owner word's key, and the client that owns it.
    Slot {
        owner_key: String,
        client: u64,
    },
    Overflow,
}

impl ClientBucket {
    /// The bucket kept at `key` (its rate; its in-flight, queue, connection counts and consume
    /// buckets beside it).
    fn new(key: String, plan: &BucketPlan, scope: Scope, name: String, kind: Kind) -> Self {
        let limits = &plan.limits;
        let label = match &kind {
            Kind::Named if name.contains([',', '*']) => format!("clients {name}"),
            Kind::Overflow => "clients beyond the pool (overflow)".to_owned(),
            _ => format!("client {name}"),
        };
        ClientBucket {
            in_flight: limits.in_flight.map(|n| (SlotKey::new(format!("{key}/inflight")), n)),
            queue: limits.queue_max_messages.map(|n| (Rc::from(format!("{key}/queue")), n)),
            connections: limits.connections.map(|n| (Rc::from(format!("{key}/connections")), n)),
            consume: plan.consume.map(|c| (c, consume_key(&key, "consume"))),
            consume_messages: plan
                .consume_messages
                .map(|c| (c, consume_key(&key, "consume-messages"))),
            rate: RateKey::new(key, &plan.rate, scope),
            limit: plan.rate,
            messages_per_second: limits.messages_per_second,
            bytes_per_second: limits.bytes_per_second,
            label,
            kind,
        }
    }

    /// Whether the connection may keep spending from it without looking again.
    fn still_held(&self) -> bool {
        match &self.kind {
            Kind::Named => true,
            Kind::Slot { owner_key, client } => shared::read(owner_key) == *client,
            Kind::Overflow => false,
        }
    }
}

/// A tenant's client buckets in shared data, by configuration.
#[derive(Debug)]
pub struct ClientKeys {
    named: Vec<Rc<ClientBucket>>,
    overflow: Option<Rc<ClientBucket>>,
    /// The pool's slots are `{pool}/{i}` (the rate) and `{pool}/{i}/owner`.
    pool: String,
    /// Tells this pool from others in the worker's cache.
    pool_tag: u64,
    /// The metric counting clients put in the overflow bucket.
    overflow_metric: String,
}

impl ClientKeys {
    /// Named entries' buckets hold across replicas when the tenant's do (`scope`); pool slots
    /// and the overflow bucket are each replica's own: a client connects to one replica, and a
    /// share of a global limit per slot would cost the quota service a limit per client.
    pub fn new(base: &str, plan: &ClientsPlan, scope: Scope, overflow_metric: String) -> ClientKeys {
        let named = plan
            .named
            .iter()
            .map(|n| {
                let key = keys::named_client_rate_key(base, n.fingerprint);
                let name = n.names().join(", ");
                Rc::new(ClientBucket::new(key, &n.plan, scope, name, Kind::Named))
            })
            .collect();
        let fingerprint = plan.default.as_ref().map_or(0, BucketPlan::fingerprint);
        let pool = format!("{base}/clients/pool/{fingerprint:016x}");
        let overflow = plan.default.as_ref().map(|default| {
            let key = format!("{base}/clients/overflow/{fingerprint:016x}");
            let name = "(overflow)".to_owned();
            Rc::new(ClientBucket::new(key, default, Scope::PerGateway, name, Kind::Overflow))
        });
        let pool_tag = client_hash(None, pool.as_bytes());
        ClientKeys {
            named,
            overflow,
            pool,
            pool_tag,
            overflow_metric,
        }
    }
}

/// A connection's client and its bucket.
#[derive(Debug, Default)]
pub struct ClientSeat {
    client: u64,
    /// The tenant keys it was found with (a new configuration or tenant looks again).
    keys: usize,
    bucket: Option<Rc<ClientBucket>>,
    checked_at: u64,
    /// The connection count this connection holds a place in.
    counted: Option<Rc<str>>,
}

impl ClientSeat {
    /// The bucket of client `name` (authenticated as `principal`) of the connection's tenant.
    /// No allocation and no host call while the client stays the same.
    pub fn bucket(
        &mut self,
        who: &Attributed,
        principal: Option<&[u8]>,
        name: &[u8],
        now: u64,
    ) -> Option<Rc<ClientBucket>> {
        let (Some(keys), Some(plan)) = (who.keys.clients.as_ref(), who.plan()?.clients.as_ref()) else {
            self.bucket = None;
            return None;
        };
        let client = client_hash(principal, name);
        let same = client == self.client && Rc::as_ptr(&who.keys) as usize == self.keys;
        if same && now < self.checked_at.saturating_add(CHECK_NS) {
            return self.bucket.clone();
        }
        if same && self.bucket.as_ref().is_some_and(|b| b.still_held()) {
            self.checked_at = now;
            return self.bucket.clone();
        }
        self.client = client;
        self.keys = Rc::as_ptr(&who.keys) as usize;
        self.checked_at = now;
        self.bucket = find(keys, plan, client, name, now);
        self.bucket.clone()
    }

    /// Counts the connection for its client's bucket (moving it from the bucket it counted for,
    /// if its client changed), or says why the client's connection limit refuses it. In dryRun
    /// the connection is counted and a refusal only counted as would-be.
    pub fn connect(&mut self, who: &Attributed, principal: Option<&[u8]>, name: &[u8], now: u64) -> Result<(), String> {
        let bucket = self.bucket(who, principal, name, now);
        let bound = bucket.as_ref().and_then(|b| b.connections.as_ref());
        if self.counted.as_deref() == bound.map(|(k, _)| &**k) {
            return Ok(());
        }
        if let (Some((key, max)), Some(b), Some(tenant)) = (bound, &bucket, who.tenant()) {
            let limit = Some(*max).filter(|_| !tenant.dry_run);
            if !shared::acquire(key, limit) {
                who.metrics.refused(Reason::Connections, 1);
                reports::client_refused(who.metrics.usage_slot(), name, 1);
                return Err(format!(
                    "maximum connections exceeded (connections limit of {} of tenant {}: {max})",
                    b.label, tenant.name
                ));
            }
            if tenant.dry_run && shared::read(key) > *max {
                who.metrics.would_refuse(Reason::Connections, 1);
            }
        }
        self.closed();
        self.counted = bound.map(|(k, _)| k.clone());
        Ok(())
    }

    /// The connection closed: its place in its client's connection count goes back.
    pub fn closed(&mut self) {
        if let Some(key) = self.counted.take() {
            shared::release(&key);
        }
    }
}

fn find(keys: &ClientKeys, plan: &ClientsPlan, client: u64, name: &[u8], now: u64) -> Option<Rc<ClientBucket>> {
    if let Some(i) = plan.named_for(name) {
        return keys.named.get(i).cloned();
    }
    let default = plan.default.as_ref()?;
    let cached = SLOTS.with(|s| s.borrow().get(&(keys.pool_tag, client)).cloned());
    if let Some(b) = cached.filter(|b| b.still_held()) {
        return Some(b);
    }
    for slot in pool::probes(client, plan.pool) {
        let key = format!("{}/{slot}", keys.pool);
        let owner_key = format!("{key}/owner");
        let verdict = Cell::new(Slot::Busy);
        let (_, stored) = shared::update::<1>(&owner_key, |[owner]| {
            // A slot with a connection counted on it, or with consumers in debt, stays its
            // client's however idle.
            let refilled = owner != client
                && owner != 0
                && SharedRate::refilled(shared::update::<SHARED_RATE_WORDS>(&key, |_| None).0, now)
                && shared::read(&format!("{key}/connections")) == 0
                && consume_settled(&key, default, now);
            verdict.set(pool::judge(owner, client, refilled));
            (verdict.get() == Slot::Free).then_some([client])
        });
        // Stored without a verdict of Free: shared data failed open, and so does the pool.
        if verdict.get() == Slot::Busy && !stored {
            continue;
        }
        let cut = &name[..name.len().min(LABEL_BYTES)];
        let name = String::from_utf8_lossy(cut).into_owned();
        let kind = Kind::Slot { owner_key, client };
        let bucket = Rc::new(ClientBucket::new(key, default, Scope::PerGateway, name, kind));
        SLOTS.with(|s| {
            let mut s = s.borrow_mut();
            if s.len() >= WORKER_CACHE {
                s.clear();
            }
            s.insert((keys.pool_tag, client), bucket.clone());
        });
        return Some(bucket);
    }
    metrics::count(&keys.overflow_metric, 1);
    keys.overflow.clone()
}

/// Where a bucket's consume state is kept, beside its rate: `{key}/{what}`.
fn consume_key(key: &str, what: &str) -> Rc<str> {
    Rc::from(format!("{key}/{what}"))
}

/// Whether the consumers of the pool slot at `key` owe nothing (each consume bucket's TAT is
/// past): a slot in debt stays its client's, or a new client would inherit the debt.
fn consume_settled(key: &str, default: &BucketPlan, now: u64) -> bool {
    [
        (default.consume, "consume"),
        (default.consume_messages, "consume-messages"),
    ]
    .into_iter()
    .filter(|(limit, _)| limit.is_some())
    .all(|(_, what)| shared::read(&consume_key(key, what)) <= now)
}
