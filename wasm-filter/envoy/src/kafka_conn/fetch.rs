//! The read side of a Kafka connection: each Fetch decided against the tenant's consume
//! permission (kafka_conn/authz.rs), then its consume buckets (held while in debt, its sizes
//! clamped), and each Fetch response charged as kafka/fetch.rs walks it. The client's bucket
//! is the one of the Fetch's client.id, charged with the records of the response to it.

use std::rc::Rc;

use weighstation_core::config::Protocol;
use weighstation_core::kafka::{fetch_topics, RequestHeader};
use weighstation_core::scan::Admission;
use weighstation_core::source::Source;

use super::{throttle_ms, Conn, Pending};
use crate::clients::ClientBucket;
use crate::{consume, reports, waiters};

/// The Fetch response being walked: what was charged on its arrival, its records so far, and
/// the bucket of the client that asked.
pub(super) struct Fetching {
    provisional: u64,
    records: u64,
    client: Option<Rc<ClientBucket>>,
}

impl Conn {
    /// A Fetch request: held while a consume bucket it passes is in debt (dryRun: never held),
    /// else forwarded with its sizes clamped to the shallowest bucket. Returns that bound.
    pub(super) fn fetch(&mut self, h: &RequestHeader<'_>, body: &mut dyn Source, now: u64) -> (Admission, Option<i32>) {
        self.who.ensure_attributed();
        if let Some(refused) = self.authorize_fetch(h, body.all()) {
            return (refused, None);
        }
        // A client bucket is looked up only where one limits reads.
        let client = if self.who.current().is_some_and(consume::clients_limit_reads) {
            self.who.client_bucket(h.client_id, now)
        } else {
            None
        };
        let Some(who) = self.who.current() else {
            return (Admission::Forward, None);
        };
        let (Some(tenant), Some(plan)) = (who.tenant(), who.plan()) else {
            return (Admission::Forward, None);
        };
        let mut overrides = std::mem::take(&mut self.fetch_overrides);
        overrides.clear();
        if !plan.overrides.is_empty() {
            let _ = fetch_topics(body.all(), h.api_version, |topic| {
                if let Some(i) = plan.override_for(Protocol::Kafka, topic) {
                    if plan.overrides.get(i).is_some_and(|o| o.consume.is_some()) && !overrides.contains(&i) {
                        overrides.push(i);
                    }
                }
            });
        }
        let limited = consume::limited(who, &overrides, client.as_deref());
        let wait = if limited {
            consume::wait_ns(who, &overrides, client.as_deref(), now)
        } else {
            0
        };
        let most = consume::most(who, &overrides, client.as_deref());
        self.fetch_overrides = overrides;
        if !limited {
            return (Admission::Forward, None);
        }
        // dryRun: counted where the debt is made (fetch_arrived), once per response.
        if wait > 0 && !tenant.dry_run {
            let since = *self.fetch_held.get_or_insert(now);
            waiters::hold(self.id, &tenant.name, since, now.saturating_add(wait));
            return (Admission::Hold, None);
        }
        if let Some(since) = self.fetch_held.take() {
            waiters::release(self.id);
            who.metrics.consume_throttled(now.saturating_sub(since) / 1_000_000);
        }
        let version = h.api_version;
        self.pending
            .insert(h.correlation_id, Pending::Fetch { version, client });
        let most = most.filter(|_| !tenant.dry_run);
        (Admission::Forward, most.map(|m| i32::try_from(m).unwrap_or(i32::MAX)))
    }

    /// The response to a Fetch of `client` is coming: its walk starts.
    pub(super) fn fetch_answered(&mut self, client: Option<Rc<ClientBucket>>) {
        self.fetching = Some(Fetching {
            provisional: 0,
            records: 0,
            client,
        });
    }

    /// A Fetch response arrives, `size` bytes: charged to the tenant's bucket now, in full, so
    /// that its throttle_time_ms can say how long the debt lasts (what is not records is given
    /// back once the walk has counted them). Returns the throttle to raise the response's to.
    pub(super) fn fetch_arrived(&mut self, size: usize, now: u64) -> Option<i32> {
        let who = self.who.current()?;
        let provisional = size as u64;
        let debt = consume::charge_tenant(who, now, provisional);
        if let Some(f) = &mut self.fetching {
            f.provisional = provisional;
        }
        if debt == 0 {
            return None;
        }
        if who.tenant()?.dry_run {
            who.metrics.consume_would_throttle();
            return None;
        }
        who.metrics.consume_throttled(0);
        let throttle = throttle_ms(debt);
        if let Some(site) = self.who.site(None, now) {
            let told = u64::try_from(throttle).unwrap_or(0);
            reports::consume_throttled(&site, told, "Fetch response's throttle_time_ms raised to", Vec::new);
        }
        Some(throttle)
    }

    pub(super) fn fetch_records(&mut self, topic: &[u8], bytes: u64, now: u64) {
        let Some(who) = self.who.current() else { return };
        if let Some(f) = &mut self.fetching {
            f.records = f.records.saturating_add(bytes);
            // Its debt holds the client's next Fetch (a throttle_time_ms already went out).
            let _ = consume::charge_client(f.client.as_deref(), now, bytes, 0);
        }
        who.metrics.consumed(bytes);
        if let Some(i) = who.plan().and_then(|p| p.override_for(Protocol::Kafka, topic)) {
            let _ = consume::charge_override(who, i, now, bytes);
        }
    }

    /// The walk is over: what was charged beyond the records goes back (unless the response did
    /// not parse: then its records are not known, and the whole response stays charged).
    pub(super) fn fetch_done(&mut self, complete: bool, now: u64) {
        let Some(f) = self.fetching.take() else { return };
        if let (true, Some(who)) = (complete, self.who.current()) {
            consume::refund_tenant(who, now, f.provisional.saturating_sub(f.records));
        }
    }
}
