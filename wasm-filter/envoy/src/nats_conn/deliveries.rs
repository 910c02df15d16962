//! The read side of a NATS connection (limits.consume; see weighstation_core::nats::Deliveries):
//! JetStream pulls held while the tenant's consume buckets (and its client's, the connection's)
//! are in debt, every delivery charged once per read, and a core subscriber the debt has
//! outrun by more than the tenant's queue.maxWait ended as nats-server ends a slow consumer.

use weighstation_core::config::Protocol;
use weighstation_core::nats::{Delivered, Delivery, Publish};

use super::Conn;
use crate::clients::ClientBucket;
use crate::clock::now_ns;
use crate::tenancy::Attributed;
use crate::{consume, reports, waiters};

/// How far a core subscriber's debt may run when its tenant sets no queue.maxWait.
const DEFAULT_MAX_DEBT_MS: u64 = 1_000;

/// nats-server's default max_payload, for a pull before the server's INFO said.
const NATS_MAX_PAYLOAD: u64 = 1 << 20;

/// What becomes of a pull request.
pub(super) enum Pull {
    Hold,
    /// Forwarded, asking for at most this many bytes if Some.
    Go(Option<u64>),
}

/// The override whose consume bucket `subject` passes, if any.
fn consume_override(who: &Attributed, subject: &[u8]) -> Option<usize> {
    let plan = who.plan()?;
    if !(0..plan.overrides.len()).any(|i| consume::override_limits_reads(who, i)) {
        return None;
    }
    plan.override_for(Protocol::Nats, subject)
        .filter(|&i| consume::override_limits_reads(who, i))
}

impl Conn {
    /// A pull request: held while a consume bucket it passes is in debt (dryRun: never held,
    /// counted). A pull that goes is remembered by its consumer, which the messages that answer
    /// it name, and may ask for at most the shallowest byte bucket's burst (but never less
    /// than the server's max_payload: a message larger than a pull's max_bytes is never
    /// delivered to it).
    pub(super) fn pull(&mut self, p: &Publish<'_>, now: u64) -> Pull {
        let client = if self.who.current().is_some_and(consume::clients_limit_reads) {
            self.who.client_bucket(None, now)
        } else {
            None
        };
        let client = client.as_deref();
        let Some(who) = self.who.current() else {
            return Pull::Go(None);
        };
        let Some(tenant) = who.tenant() else {
            return Pull::Go(None);
        };
        let over = consume_override(who, p.subject);
        let overrides = over.as_slice();
        if !consume::limited(who, overrides, client) {
            return Pull::Go(None);
        }
        let wait = consume::wait_ns(who, overrides, client, now);
        if wait > 0 && !tenant.dry_run {
            let since = *self.pull_held.get_or_insert(now);
            waiters::hold(self.id, &tenant.name, since, now.saturating_add(wait));
            return Pull::Hold;
        }
        if wait > 0 {
            who.metrics.consume_would_throttle();
        }
        if let Some(since) = self.pull_held.take() {
            waiters::release(self.id);
            let held_ms = now.saturating_sub(since) / 1_000_000;
            who.metrics.consume_throttled(held_ms);
            if let Some(site) = self.who.site(over, now) {
                reports::consume_throttled(&site, held_ms, "pull held", || p.subject.to_vec());
            }
        }
        self.deliveries.pulled(p.subject, over);
        let most = consume::most(who, overrides, client).filter(|_| !tenant.dry_run);
        Pull::Go(most.map(|m| m.max(p.server_max_payload.unwrap_or(NATS_MAX_PAYLOAD))))
    }

    /// A message delivered to the client: counted into this read. False if it is a core
    /// delivery that finds the tenant's debt longer than its queue.maxWait: a slow consumer.
    pub(super) fn delivered(&mut self, d: &Delivered<'_>, now: &mut Option<u64>) -> bool {
        if !self.who.current().is_some_and(consume::reads_limited) {
            return true;
        }
        let over = match self.deliveries.delivery(d.reply) {
            Delivery::Pull(over) => over,
            Delivery::Core => {
                let over = self.who.current().and_then(|who| consume_override(who, d.subject));
                // A status (a heartbeat, a pull's timeout) delivers nothing to hold back.
                if !self.debt_checked && !d.status {
                    self.debt_checked = true;
                    let now = *now.get_or_insert_with(now_ns);
                    let client = self.who.client_bucket(None, now);
                    let Some(who) = self.who.current() else { return true };
                    if outran(who, over, client.as_deref(), now, &mut self.debt_until) {
                        self.slow_consumer = true;
                        return false;
                    }
                }
                over
            }
        };
        self.deliveries.count(d.bytes as u64, over);
        true
    }

    /// The read is over: what it delivered is charged, once, and counted.
    pub(super) fn deliveries_done(&mut self) {
        self.debt_checked = false;
        let client = if self.who.current().is_some_and(consume::clients_limit_reads) {
            self.who.client_bucket(None, now_ns())
        } else {
            None
        };
        let Some(who) = self.who.current() else { return };
        let mut debt_until = None;
        self.deliveries.end_read(|read| {
            let now = now_ns();
            who.metrics.consumed(read.bytes);
            let mut debt = consume::charge_tenant(who, now, read.bytes);
            debt = debt.max(consume::charge_client(
                client.as_deref(),
                now,
                read.bytes,
                read.messages,
            ));
            debt = debt.max(consume::charge_tenant_messages(who, now, read.messages));
            for &(over, bytes, messages) in &read.overrides {
                debt = debt.max(consume::charge_override(who, over, now, bytes));
                debt = debt.max(consume::charge_override_messages(who, over, now, messages));
            }
            debt_until = Some(now.saturating_add(debt));
        });
        if let Some(until) = debt_until {
            self.debt_until = until;
        }
    }
}

/// Whether the debt of the buckets a core delivery passes is longer than the tenant's
/// queue.maxWait (a slow consumer; dryRun: counted, never one). The debt the connection last
/// saw (`debt_until`) is checked first; only when that is already too long is the shared
/// bucket read.
fn outran(
    who: &Attributed,
    over: Option<usize>,
    client: Option<&ClientBucket>,
    now: u64,
    debt_until: &mut u64,
) -> bool {
    let Some(tenant) = who.tenant() else { return false };
    let max_debt = tenant.limits.queue_max_wait_ms.unwrap_or(DEFAULT_MAX_DEBT_MS) * 1_000_000;
    if debt_until.saturating_sub(now) <= max_debt || consume::wait_ns(who, over.as_slice(), client, now) <= max_debt {
        return false;
    }
    if tenant.dry_run {
        who.metrics.consume_would_throttle();
        *debt_until = now;
        return false;
    }
    log::info!(
        "weighstation: nats subscriber of tenant {} is a slow consumer (its consume debt is over {} ms): closing as nats-server would",
        tenant.name,
        max_debt / 1_000_000
    );
    who.metrics.slow_consumer();
    true
}
