//! A Produce request decided: its batches read (sizes, counts, topics), against the
//! tenant's size, rate, in-flight and queue limits, the rate set aside for retries
//! (weighstation_core::kafka::Retries) and the sequence gaps of idempotent producers
//! (weighstation_core::kafka::Gaps); a refusal answered in the client's own words.

use weighstation_core::config::Protocol;
use weighstation_core::kafka::authz::TOPIC_AUTHORIZATION_FAILED;
use weighstation_core::kafka::{
    produce_response, visit_produce, Batch, PartitionError, ProduceSummary, RequestHeader, Retries, HORIZON_NS,
    MESSAGE_TOO_LARGE, THROTTLING_QUOTA_EXCEEDED,
};
use weighstation_core::limits::Reason;
use weighstation_core::report::observed;
use weighstation_core::scan::Admission;
use weighstation_core::source::Source;

use super::{throttle_ms, Conn, Pending, MAX_THROTTLE_MS};
use crate::gatekeeper::{self, Admit, Ask, Prepaid};
use crate::reports;

/// A Produce request as read: its totals, the first override met, and whether a batch is over
/// its maxMessageBytes.
struct Inspected {
    summary: ProduceSummary,
    over: Option<usize>,
    oversized: bool,
    /// The largest record batch (what maxMessageBytes measures).
    largest: usize,
}

impl Conn {
    pub(super) fn produce(&mut self, h: &RequestHeader<'_>, body: &mut dyn Source, now: u64) -> Admission {
        self.who.ensure_attributed();
        let Some(who) = self.who.current() else {
            return Admission::Forward;
        };
        let (Some(tenant), Some(plan)) = (who.tenant(), who.plan()) else {
            return Admission::Forward;
        };
        // One pass without allocating: the totals, the first override met, and whether any
        // record batch is over its topic's maxMessageBytes.
        let mut over = None;
        let mut oversized = false;
        let mut largest = 0;
        let mut batches = std::mem::take(&mut self.batches);
        batches.clear();
        let mut topics = std::mem::take(&mut self.topics);
        topics.clear();
        let reporting = reports::enabled();
        let (grants, built) = (&tenant.permissions, who.config.built);
        let decisions = &mut self.produce_decisions;
        let mut forbidden = None;
        let summary = visit_produce(body, h.api_version, &mut self.topic, |p| {
            if grants.produce.is_some()
                && forbidden.is_none()
                && !decisions.decide(built, p.topic, |t| grants.may_produce(t))
            {
                forbidden = Some(p.topic_at);
            }
            batches.push(Batch::of(p));
            largest = largest.max(p.largest_batch);
            if reporting {
                topics.push((p.topic_at, p.topic.len(), p.records));
            }
            let o = plan.override_for(Protocol::Kafka, p.topic);
            over = over.or(o);
            let max = o
                .and_then(|i| plan.overrides.get(i)?.max_message_bytes)
                .or(tenant.limits.max_message_bytes);
            oversized |= max.is_some_and(|m| p.largest_batch as u64 > m);
        });
        let Ok(summary) = summary else {
            self.batches = batches;
            self.topics = topics;
            if grants.produce.is_some() {
                // Its topics unread, it cannot be decided against the tenant's produce list.
                log::info!(
                    "weighstation: kafka Produce v{} the gateway cannot read closes the connection: the tenant's topics are listed",
                    h.api_version
                );
                return Admission::Close(Vec::new());
            }
            log::debug!("weighstation: produce v{} not inspected", h.api_version);
            return Admission::Forward;
        };
        let inspected = Inspected {
            summary,
            over,
            oversized,
            largest,
        };
        self.topics = topics;
        if let Some(at) = forbidden {
            // Before any limit: a message the tenant may not send takes no tokens.
            self.batches = batches;
            return self.refuse_topic(h, body, &inspected, now, at);
        }
        let admission = self.decide(h, body, &batches, &inspected, now);
        self.batches = batches;
        admission
    }

    /// Decides an inspected Produce: sizes, then the tenant's limits, spending what was set
    /// aside for it if it is a retry (see weighstation_core::kafka::Retries).
    fn decide(
        &mut self,
        h: &RequestHeader<'_>,
        body: &mut dyn Source,
        batches: &[Batch],
        produce: &Inspected,
        now: u64,
    ) -> Admission {
        let client = self.who.client_bucket(h.client_id, now);
        let Some(who) = self.who.current() else {
            return Admission::Forward;
        };
        let Some(tenant) = who.tenant() else {
            return Admission::Forward;
        };
        let Inspected {
            summary,
            over,
            oversized,
            ..
        } = *produce;
        let awaits_reply = summary.acks != 0;
        if oversized {
            if tenant.dry_run {
                who.metrics.would_refuse(Reason::Size, summary.records);
            } else {
                who.metrics.refused(Reason::Size, summary.records);
                let detail = format!("maxMessageBytes limit of tenant {}", tenant.name);
                return self.refuse(h, body, produce, now, (Reason::Size, over), &detail, 0);
            }
        }
        self.retries.expire(now);
        let claim = self.retries.claim(batches);
        if claim.messages > 0 && !claim.ready(now) && !tenant.dry_run {
            // The client came back before the time it was given: the same answer again.
            who.metrics.refused(Reason::Rate, summary.records);
            let wait = claim.ready_at - now;
            let detail = format!(
                "rate limit of tenant {}: retried {} ms before the time given",
                tenant.name,
                wait / 1_000_000
            );
            self.retries.refused(batches);
            self.gaps.refused(batches, claim.ready_at);
            return self.refuse(h, body, produce, now, (Reason::Rate, None), &detail, throttle_ms(wait));
        }
        let ask = Ask {
            who,
            over,
            client: client.as_deref(),
            client_name: self.who.client_name(h.client_id),
            bytes: summary.bytes,
            messages: summary.records,
            awaits_reply,
            now,
            me: self.id,
            check_size: false,
            prepaid: Prepaid {
                messages: claim.messages,
                bytes: claim.bytes,
            },
        };
        if let Some(head_ready) = self.gaps.blocked(batches, now).filter(|_| !tenant.dry_run) {
            // Forwarded, it would land after a gap in its producer's sequence: the broker would
            // reject it after the tenant paid for it (weighstation_core::kafka::Gaps). Its rate
            // is set aside as a refused batch's is, for when it can follow the one refused, so
            // the client sending both again gets both through.
            who.metrics.refused(Reason::Rate, summary.records);
            let mut ready_at = head_ready.max(claim.ready_at);
            if let Some(reserved) = set_aside(&mut self.retries, &ask, batches) {
                ready_at = ready_at.max(reserved);
            }
            let detail = format!(
                "rate limit of tenant {}: an earlier batch of the partition was refused and has not been sent again",
                tenant.name
            );
            self.retries.refused(batches);
            return self.refuse(
                h,
                body,
                produce,
                now,
                (Reason::Rate, None),
                &detail,
                throttle_ms(ready_at.saturating_sub(now)),
            );
        }
        match gatekeeper::admit(&ask, &mut self.held) {
            Admit::Forward(slot, delayed) => {
                if let (Some(ns), Some((reason, by))) = (delayed, self.held.reason()) {
                    if let Some(site) = self.who.site(by, now) {
                        reports::delayed(&site, reason, ns, || first_topic(body, h.api_version));
                    }
                }
                let usage = who.metrics.usage_slot();
                for &(at, len, records) in &self.topics {
                    reports::kafka_topic(usage, body.at(at, len).get(..len).unwrap_or_default(), records);
                }
                self.retries.spent(batches);
                self.gaps.forwarded(batches);
                if awaits_reply {
                    let delay_ms = delayed.map_or(0, |ns| i32::try_from(ns / 1_000_000).unwrap_or(i32::MAX));
                    if slot.is_some() {
                        who.metrics.in_flight(1);
                    }
                    self.pending.insert(
                        h.correlation_id,
                        Pending::Produced {
                            slot,
                            version: h.api_version,
                            delay_ms,
                        },
                    );
                }
                Admission::Forward
            }
            Admit::Hold => Admission::Hold,
            Admit::Refuse(reason, detail, retry_ms, by) => {
                let mut throttle = i32::try_from(retry_ms).unwrap_or(i32::MAX);
                if reason == Reason::Rate {
                    if let Some(ready_at) = set_aside(&mut self.retries, &ask, batches) {
                        throttle = throttle_ms(ready_at.max(claim.ready_at).saturating_sub(now));
                    }
                }
                self.retries.refused(batches);
                let ready_at = now.saturating_add(u64::try_from(throttle).unwrap_or(0).saturating_mul(1_000_000));
                self.gaps.refused(batches, ready_at);
                self.refuse(h, body, produce, now, (reason, by), &detail, throttle)
            }
        }
    }

    /// A Produce naming a topic the tenant may not produce to (the first at `topic_at`): each
    /// partition of such a topic answered TOPIC_AUTHORIZATION_FAILED, any other beside it
    /// THROTTLING_QUOTA_EXCEEDED (retried by the client).
    fn refuse_topic(
        &mut self,
        h: &RequestHeader<'_>,
        body: &mut dyn Source,
        produce: &Inspected,
        now: u64,
        topic_at: usize,
    ) -> Admission {
        let topic = first_topic_at(body, h.api_version, topic_at);
        let detail = format!(
            "produce to {} not granted (spec.permissions.kafka.produce)",
            String::from_utf8_lossy(&topic)
        );
        if let Some(who) = self.who.current() {
            who.metrics.refused(Reason::Permission, produce.summary.records);
        }
        self.refuse(h, body, produce, now, (Reason::Permission, None), &detail, 0)
    }

    /// A refused Produce: acks=0 has no response to carry the error, so it is dropped (and
    /// counted); otherwise the broker gets an ApiVersions in its place, whose answer is swapped.
    /// `refused` is the reason and the override whose limit refused (None: the tenant's).
    #[allow(clippy::too_many_arguments)]
    fn refuse(
        &mut self,
        h: &RequestHeader<'_>,
        body: &mut dyn Source,
        produce: &Inspected,
        now: u64,
        refused: (Reason, Option<usize>),
        detail: &str,
        throttle_ms: i32,
    ) -> Admission {
        log::debug!("weighstation: kafka produce refused: {detail}");
        // A longer wait is told in steps: a client muted for it would not see a policy that
        // lets it through sooner (an override removed, a rate raised) until its throttle ends.
        let throttle_ms = throttle_ms.min(MAX_THROTTLE_MS);
        let throttle_ns = u64::try_from(throttle_ms).unwrap_or(0).saturating_mul(1_000_000);
        self.retries.told(now.saturating_add(throttle_ns));
        let (reason, by) = refused;
        let awaits_reply = produce.summary.acks != 0;
        if let Some(site) = self.who.site(by, now) {
            let retry_after_ms = u32::try_from(throttle_ms).unwrap_or(0);
            let told = reports::Told {
                detail,
                code: match (awaits_reply, reason) {
                    (false, _) => "dropped (acks=0: no response to carry an error)",
                    (true, Reason::Size) => "MESSAGE_TOO_LARGE (10)",
                    (true, Reason::Permission) => "TOPIC_AUTHORIZATION_FAILED (29)",
                    (true, _) => "THROTTLING_QUOTA_EXCEEDED (89)",
                },
                retry_after_ms,
            };
            let largest = produce.largest as u64;
            reports::refused(
                &site,
                reason,
                &told,
                || first_topic(body, h.api_version),
                || observed(reason, largest, retry_after_ms, detail),
            );
        }
        if !awaits_reply {
            return Admission::Replace(Vec::new());
        }
        let (plan, tenant) = match self.who.current() {
            Some(w) => (w.plan(), w.tenant()),
            None => (None, None),
        };
        let mut topics: Vec<(Vec<u8>, Vec<PartitionError>)> = Vec::new();
        let _ = visit_produce(body, h.api_version, &mut self.topic, |p| {
            let error = match reason {
                Reason::Size => {
                    let max = plan
                        .and_then(|plan| {
                            let o = plan.override_for(Protocol::Kafka, p.topic)?;
                            plan.overrides.get(o)?.max_message_bytes
                        })
                        .or(tenant.and_then(|t| t.limits.max_message_bytes));
                    if max.is_some_and(|m| p.largest_batch as u64 > m) {
                        MESSAGE_TOO_LARGE
                    } else {
                        THROTTLING_QUOTA_EXCEEDED
                    }
                }
                Reason::Permission if tenant.is_some_and(|t| !t.permissions.may_produce(p.topic)) => {
                    TOPIC_AUTHORIZATION_FAILED
                }
                _ => THROTTLING_QUOTA_EXCEEDED,
            };
            let partition = PartitionError {
                partition: p.partition,
                error,
            };
            match topics.last_mut() {
                Some((name, parts)) if name.as_slice() == p.topic => parts.push(partition),
                _ => topics.push((p.topic.to_vec(), vec![partition])),
            }
        });
        let response = produce_response(
            h.api_version,
            h.correlation_id,
            &topics,
            throttle_ms,
            Some(detail.as_bytes()),
        );
        self.answer_refused(h, response)
    }
}

/// Sets a refused request's rate aside for its retry, on a connection that retries (see
/// weighstation_core::kafka::Retries): when that retry may come, if any was set aside.
fn set_aside(retries: &mut Retries, ask: &Ask<'_>, batches: &[Batch]) -> Option<u64> {
    if !retries.retries_seen() {
        return None;
    }
    let (messages, bytes) = retries.unreserved(batches)?;
    let ready_at = gatekeeper::reserve(ask, messages, bytes, HORIZON_NS)?;
    retries.reserve(batches, ready_at);
    Some(ready_at)
}

/// The topic whose name is at `at` in a Produce body.
fn first_topic_at(body: &mut dyn Source, version: i16, at: usize) -> Vec<u8> {
    let mut topic = Vec::new();
    let _ = visit_produce(body, version, &mut Vec::new(), |p| {
        if p.topic_at == at && topic.is_empty() {
            topic = p.topic.to_vec();
        }
    });
    topic
}

/// A Produce's first topic, for a decision event.
fn first_topic(body: &mut dyn Source, version: i16) -> Vec<u8> {
    let mut topic = Vec::new();
    let _ = visit_produce(body, version, &mut Vec::new(), |p| {
        if topic.is_empty() {
            topic = p.topic.to_vec();
        }
    });
    topic
}
