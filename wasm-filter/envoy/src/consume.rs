//! The read side's buckets (limits.consume) in shared data, one per tenant, per override and
//! per client bucket that sets one: what the tenant's consumers received is charged after the
//! fact, and a fetch waits while any bucket it passes is in debt (weighstation_core::consume).
//! Buckets are per gateway replica whatever the tenant's scope: a fetch is never held on the
//! quota service.

use weighstation_core::consume::ConsumeLimit;

use crate::clients::ClientBucket;
use crate::shared;
use crate::tenancy::Attributed;

fn tenant_bucket(who: &Attributed) -> Option<(ConsumeLimit, &str)> {
    who.plan()?.consume.zip(who.keys.consume.as_deref())
}

fn override_bucket(who: &Attributed, over: usize) -> Option<(ConsumeLimit, &str)> {
    let limit = who.plan()?.overrides.get(over)?.consume?;
    Some((limit, who.keys.overrides.get(over)?.consume.as_deref()?))
}

fn tenant_message_bucket(who: &Attributed) -> Option<(ConsumeLimit, &str)> {
    who.plan()?.consume_messages.zip(who.keys.consume_messages.as_deref())
}

fn override_message_bucket(who: &Attributed, over: usize) -> Option<(ConsumeLimit, &str)> {
    let limit = who.plan()?.overrides.get(over)?.consume_messages?;
    Some((limit, who.keys.overrides.get(over)?.consume_messages.as_deref()?))
}

fn client_bucket(client: Option<&ClientBucket>) -> Option<(ConsumeLimit, &str)> {
    client?.consume.as_ref().map(|(limit, key)| (*limit, &**key))
}

fn client_message_bucket(client: Option<&ClientBucket>) -> Option<(ConsumeLimit, &str)> {
    client?.consume_messages.as_ref().map(|(limit, key)| (*limit, &**key))
}

/// The buckets of NATS deliveries (consume.messagesPerSecond): the tenant's, those of
/// `overrides` that set one, and the client's.
fn message_buckets<'a>(
    who: &'a Attributed,
    overrides: &'a [usize],
    client: Option<&'a ClientBucket>,
) -> impl Iterator<Item = (ConsumeLimit, &'a str)> + 'a {
    tenant_message_bucket(who)
        .into_iter()
        .chain(overrides.iter().filter_map(|&i| override_message_bucket(who, i)))
        .chain(client_message_bucket(client))
}

/// The byte buckets a fetch passes: the tenant's, those of `overrides` that set one, and the
/// client's.
fn buckets<'a>(
    who: &'a Attributed,
    overrides: &'a [usize],
    client: Option<&'a ClientBucket>,
) -> impl Iterator<Item = (ConsumeLimit, &'a str)> + 'a {
    tenant_bucket(who)
        .into_iter()
        .chain(overrides.iter().filter_map(|&i| override_bucket(who, i)))
        .chain(client_bucket(client))
}

/// Whether the tenant, any of its overrides or any of its client buckets limits what its
/// consumers receive.
pub fn reads_limited(who: &Attributed) -> bool {
    who.plan().is_some_and(|p| {
        p.consume.is_some()
            || p.consume_messages.is_some()
            || p.overrides
                .iter()
                .any(|o| o.consume.is_some() || o.consume_messages.is_some())
    }) || clients_limit_reads(who)
}

/// Whether override `over` limits what the tenant's consumers receive.
pub fn override_limits_reads(who: &Attributed, over: usize) -> bool {
    who.plan()
        .and_then(|p| p.overrides.get(over))
        .is_some_and(|o| o.consume.is_some() || o.consume_messages.is_some())
}

/// Whether any of the tenant's client buckets limits what its consumers receive.
pub fn clients_limit_reads(who: &Attributed) -> bool {
    who.plan()
        .and_then(|p| p.clients.as_ref())
        .is_some_and(|c| c.limits_reads())
}

/// Whether the tenant, any of `overrides` or the client limits what its consumers receive.
pub fn limited(who: &Attributed, overrides: &[usize], client: Option<&ClientBucket>) -> bool {
    buckets(who, overrides, client).next().is_some() || message_buckets(who, overrides, client).next().is_some()
}

/// How long until a fetch or pull passing these buckets may go (ns): 0 now.
pub fn wait_ns(who: &Attributed, overrides: &[usize], client: Option<&ClientBucket>, now: u64) -> u64 {
    buckets(who, overrides, client)
        .chain(message_buckets(who, overrides, client))
        .map(|(limit, key)| limit.wait_ns(shared::read(key), now))
        .max()
        .unwrap_or(0)
}

/// The most one fetch passing these buckets may ask for: the shallowest byte bucket's depth.
pub fn most(who: &Attributed, overrides: &[usize], client: Option<&ClientBucket>) -> Option<u64> {
    buckets(who, overrides, client).map(|(limit, _)| limit.burst()).min()
}

/// Charges what a client's consumers received, `bytes` in `messages` (NATS deliveries), to its
/// buckets; returns how long it is then in debt (ns).
pub fn charge_client(client: Option<&ClientBucket>, now: u64, bytes: u64, messages: u64) -> u64 {
    let bytes = client_bucket(client).map_or(0, |(limit, key)| charge(limit, key, now, bytes));
    let messages = client_message_bucket(client).map_or(0, |(limit, key)| charge(limit, key, now, messages));
    bytes.max(messages)
}

/// Charges `messages` NATS deliveries to the tenant's message bucket, if it has one; returns
/// how long it is then in debt (ns).
pub fn charge_tenant_messages(who: &Attributed, now: u64, messages: u64) -> u64 {
    tenant_message_bucket(who).map_or(0, |(limit, key)| charge(limit, key, now, messages))
}

/// Charges `messages` NATS deliveries to override `over`'s message bucket, if it has one.
pub fn charge_override_messages(who: &Attributed, over: usize, now: u64, messages: u64) -> u64 {
    override_message_bucket(who, over).map_or(0, |(limit, key)| charge(limit, key, now, messages))
}

/// Charges `bytes` to the tenant's bucket; returns how long it is then in debt (ns).
pub fn charge_tenant(who: &Attributed, now: u64, bytes: u64) -> u64 {
    tenant_bucket(who).map_or(0, |(limit, key)| charge(limit, key, now, bytes))
}

/// Charges `bytes` to override `over`'s bucket, if it has one; returns how long it is then in
/// debt (ns).
pub fn charge_override(who: &Attributed, over: usize, now: u64, bytes: u64) -> u64 {
    override_bucket(who, over).map_or(0, |(limit, key)| charge(limit, key, now, bytes))
}

/// Gives back `bytes` of a provisional charge to the tenant's bucket.
pub fn refund_tenant(who: &Attributed, now: u64, bytes: u64) {
    if bytes == 0 {
        return;
    }
    if let Some((limit, key)) = tenant_bucket(who) {
        shared::update::<1>(key, |[tat]| Some([limit.refund(tat, now, bytes)]));
    }
}

fn charge(limit: ConsumeLimit, key: &str, now: u64, bytes: u64) -> u64 {
    let (before, _) = shared::update::<1>(key, |[tat]| Some([limit.charge(tat, now, bytes)]));
    limit.wait_ns(limit.charge(before[0], now, bytes), now)
}
