//! Rate set aside for the retry of a refused Produce, per connection.
//!
//! A Kafka producer that retries THROTTLING_QUOTA_EXCEEDED (Apache Kafka's Java client) waits
//! out `throttle_time_ms` and then a backoff of its own (100 ms, doubling to 1 s per attempt)
//! before it sends the refused batch again. Refused without more, the batch finds the bucket
//! refilled only up to its burst — the rest of the backoff's rate is lost — and competes again
//! with everything the client sent since: such a client delivers a fraction of its limit. So
//! once a connection has shown that it retries (a batch refused before comes back), each refusal
//! also sets the batch's cost aside in the rate bucket, as if admitted at the time it could have
//! been; `throttle_time_ms` says when that is, and the retry of the same batch (same partition,
//! same CRC, which covers producer id, sequence and records) is admitted without paying again.
//! The bucket's rate still bounds what is admitted; a connection that never retries never has
//! rate set aside for it.

use super::PartitionBatch;

/// How far ahead rate is set aside: beyond it a refusal only says when to retry. The wait is the
/// debt ahead of the batch, and a batch larger than the burst leaves its whole cost as debt: a
/// 16 KiB franz-go batch of 114 records is 2.3 s at 50 records/s, 4.6 s at 25. With a 1 s horizon
/// (Java's longest backoff), two producers of one tenant sending such batches were never given a
/// reservation while the other's batch was ahead; each retry found the bucket spent again, one
/// batch was refused six times in 10 s and, after a broker restart, records timed out in the
/// soak. 10 s covers those batches at the rates they meet; the client waits it out as
/// throttle_time_ms, which Java and franz-go, the clients that retry, honour in full (KIP-219).
pub const HORIZON_NS: u64 = 10_000_000_000;

/// How long a reservation waits for its retry after it is ready — or after the connection's
/// latest throttle ends, if later: past the client's longest backoff, it is given back.
pub const CLAIM_WINDOW_NS: u64 = 3_000_000_000;

/// A retry may come this much before its reservation is ready (throttle_time_ms is rounded to
/// whole milliseconds, and a client's timer is no more exact).
pub const EARLY_NS: u64 = 10_000_000;

/// Reservations one connection may hold: a producer pipelines 5 requests by default.
const MAX_RESERVED: usize = 16;

/// Refused batches remembered to notice a retry.
const REMEMBERED: usize = 32;

/// One partition's record set in a request, recognisable when it is sent again, and its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub key: u64,
    pub messages: u64,
    pub bytes: u64,
    /// The topic and partition alone, and where an idempotent producer's batch sits in its
    /// partition's sequence (crate::kafka::gaps).
    pub partition: u64,
    pub producer_id: i64,
    pub base_sequence: i32,
}

impl Batch {
    pub fn of(p: &PartitionBatch<'_>) -> Batch {
        fn mix(mut h: u64, bytes: &[u8]) -> u64 {
            for b in bytes {
                h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
            h
        }
        let partition = mix(mix(0xcbf2_9ce4_8422_2325, p.topic), &p.partition.to_be_bytes());
        let key = mix(mix(partition, &p.crc.to_be_bytes()), &p.records.to_be_bytes());
        Batch {
            key,
            messages: p.records,
            bytes: p.bytes as u64,
            partition,
            producer_id: p.producer_id,
            base_sequence: p.base_sequence,
        }
    }
}

/// Rate set aside for one refused batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reservation {
    batch: Batch,
    ready_at: u64,
}

/// What a request's batches hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Claim {
    /// Records and bytes of the batches whose rate is already set aside.
    pub messages: u64,
    pub bytes: u64,
    /// When the latest of those reservations is ready (0 if none).
    pub ready_at: u64,
}

impl Claim {
    /// The request may spend its reservations at `now`.
    pub fn ready(&self, now: u64) -> bool {
        self.ready_at <= now.saturating_add(EARLY_NS)
    }
}

/// One connection's reservations and recently refused batches.
#[derive(Debug, Default)]
pub struct Retries {
    reserved: Vec<Reservation>,
    refused: Vec<u64>,
    next_refused: usize,
    retries_seen: bool,
    /// When the latest throttle_time_ms told on this connection ends. A client mutes the whole
    /// connection until then (KIP-219), so no batch on it can come back sooner.
    muted_until: u64,
}

impl Retries {
    /// Sums what is reserved for the request's batches. A batch refused before marks the
    /// connection as one that retries (reservations exist only once it has).
    pub fn claim(&mut self, batches: &[Batch]) -> Claim {
        let mut claim = Claim::default();
        for b in batches {
            if let Some(r) = self.reserved.iter().find(|r| r.batch.key == b.key) {
                claim.messages += r.batch.messages;
                claim.bytes += r.batch.bytes;
                claim.ready_at = claim.ready_at.max(r.ready_at);
            } else if self.refused.contains(&b.key) {
                self.retries_seen = true;
            }
        }
        claim
    }

    /// Whether refusals on this connection should set rate aside.
    pub fn retries_seen(&self) -> bool {
        self.retries_seen
    }

    /// The request was admitted: its reservations are spent.
    pub fn spent(&mut self, batches: &[Batch]) {
        self.reserved.retain(|r| !batches.iter().any(|b| b.key == r.batch.key));
    }

    /// The request was refused: remembers its batches.
    pub fn refused(&mut self, batches: &[Batch]) {
        for &Batch { key, .. } in batches {
            if self.refused.contains(&key) {
                continue;
            }
            if self.refused.len() < REMEMBERED {
                self.refused.push(key);
            } else {
                self.refused[self.next_refused] = key;
                self.next_refused = (self.next_refused + 1) % REMEMBERED;
            }
        }
    }

    /// The batches of a refused request not yet reserved, if they all fit; what
    /// [`Retries::reserve`] would record.
    pub fn unreserved(&self, batches: &[Batch]) -> Option<(u64, u64)> {
        let fresh = batches
            .iter()
            .filter(|b| !self.reserved.iter().any(|r| r.batch.key == b.key));
        let (n, messages, bytes) = fresh.fold((0, 0, 0), |(n, m, by), b| (n + 1, m + b.messages, by + b.bytes));
        (n > 0 && self.reserved.len() + n <= MAX_RESERVED).then_some((messages, bytes))
    }

    /// Records rate set aside for the batches not yet reserved, ready at `ready_at`.
    pub fn reserve(&mut self, batches: &[Batch], ready_at: u64) {
        for b in batches {
            if self.reserved.len() < MAX_RESERVED && !self.reserved.iter().any(|r| r.batch.key == b.key) {
                self.reserved.push(Reservation { batch: *b, ready_at });
            }
        }
    }

    /// A refusal told the client to wait until `until` (now + throttle_time_ms).
    pub fn told(&mut self, until: u64) {
        self.muted_until = self.muted_until.max(until);
    }

    /// Forgets reservations whose retry did not come within the claim window (the client gave
    /// the batch up). The window runs from the later of the reservation's time and the end of
    /// the connection's latest throttle: a producer pipelining five requests is told five
    /// waits and mutes the connection for the longest, so its first batch's reservation must
    /// outlast the others' throttle. Their rate is not given back: its time has passed, and
    /// giving it now would admit more than the rate.
    pub fn expire(&mut self, now: u64) {
        let muted_until = self.muted_until;
        self.reserved
            .retain(|r| r.ready_at.max(muted_until).saturating_add(CLAIM_WINDOW_NS) >= now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(topic: &'static [u8], partition: i32, crc: u32) -> Batch {
        Batch::of(&PartitionBatch {
            topic,
            topic_at: 0,
            partition,
            bytes: 1000,
            largest_batch: 1000,
            records: 10,
            crc,
            producer_id: -1,
            base_sequence: -1,
        })
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_batch_is_known_again_by_topic_partition_and_crc() {
        assert_eq!(batch(b"t", 0, 7), batch(b"t", 0, 7));
        assert_ne!(batch(b"t", 0, 7).key, batch(b"t", 1, 7).key);
        assert_ne!(batch(b"t", 0, 7).key, batch(b"u", 0, 7).key);
        assert_ne!(batch(b"t", 0, 7).key, batch(b"t", 0, 8).key);
    }

    #[test]
    fn a_connection_gets_reservations_only_once_it_has_retried() {
        let mut r = Retries::default();
        let first = [batch(b"t", 0, 1)];
        assert_eq!(r.claim(&first), Claim::default());
        assert!(!r.retries_seen());
        r.refused(&first);
        assert!(!r.retries_seen(), "a refusal alone says nothing about the client");
        assert_eq!(r.claim(&[batch(b"t", 0, 2)]), Claim::default());
        assert!(!r.retries_seen(), "a new batch is not a retry");
        r.claim(&first);
        assert!(r.retries_seen(), "the refused batch came back");
    }

    #[test]
    fn a_retry_claims_what_was_set_aside_for_it_once_ready() {
        let mut r = Retries::default();
        let a = [batch(b"t", 0, 1)];
        let b = batch(b"t", 1, 2);
        assert_eq!(r.unreserved(&a), Some((10, 1000)));
        r.reserve(&a, 100 * MS);
        assert_eq!(r.unreserved(&a), None, "already reserved");
        let claim = r.claim(&[a[0], b]);
        assert_eq!(
            claim,
            Claim {
                messages: 10,
                bytes: 1000,
                ready_at: 100 * MS
            },
            "only the reserved batch is prepaid"
        );
        assert!(!claim.ready(89 * MS));
        assert!(claim.ready(90 * MS), "a retry may come a little early");
        r.spent(&a);
        assert_eq!(r.claim(&a), Claim::default(), "spent once");
    }

    #[test]
    fn reservations_are_bounded_and_expire_unclaimed() {
        let mut r = Retries::default();
        let many: Vec<Batch> = (0..MAX_RESERVED as u32).map(|i| batch(b"t", 0, i)).collect();
        assert!(r.unreserved(&many).is_some());
        r.reserve(&many, 0);
        assert_eq!(r.unreserved(&[batch(b"t", 0, 999)]), None, "full");
        r.expire(CLAIM_WINDOW_NS);
        assert_eq!(r.claim(&many[..1]).messages, 10, "kept through the claim window");
        r.expire(CLAIM_WINDOW_NS + 1);
        assert_eq!(r.claim(&many[..1]), Claim::default(), "given up after it");
        assert!(r.unreserved(&[batch(b"t", 0, 999)]).is_some());
    }

    #[test]
    fn a_reservation_outlasts_the_connections_longest_throttle() {
        // Five pipelined requests refused at once: the first batch's rate is ready in 1 s, the
        // last's in 6 s, and the client, muted for the longest throttle, sends them all again
        // after 6 s and a backoff.
        let mut r = Retries::default();
        let first = [batch(b"t", 0, 1)];
        let last = [batch(b"t", 0, 5)];
        r.reserve(&first, 1000 * MS);
        r.told(1000 * MS);
        r.reserve(&last, 6000 * MS);
        r.told(6000 * MS);
        r.expire(6500 * MS);
        assert_eq!(r.claim(&first).messages, 10, "the first batch is still the client's");
        r.expire(6000 * MS + CLAIM_WINDOW_NS + 1);
        assert_eq!(
            r.claim(&first),
            Claim::default(),
            "given up a claim window after the throttle"
        );
    }
}
