//! No gap in an idempotent producer's sequence, per connection.
//!
//! An idempotent producer (Apache Kafka's Java client by default, franz-go, librdkafka with
//! `enable.idempotence`) numbers each partition's batches, and a broker appends a batch only
//! if it follows the last one appended; it answers OUT_OF_ORDER_SEQUENCE_NUMBER to any other.
//! A producer pipelines up to 5 requests on a connection. When the gateway refuses one batch
//! over a limit and forwards the next batches of the same partition, those land after a gap:
//! the broker rejects them, after the gateway charged them to the tenant, and the client,
//! resending them in order, may lose its place in the sequence (measured with the Java client
//! in front of a 3-broker cluster at 400 records/s over a 300/s limit: the tenant got 150/s,
//! and half its records timed out). So once a batch is refused, a later batch of the same
//! producer and partition on the connection is refused too, without being charged, until the
//! refused one comes back (its retry) or the producer starts its sequence again (a new
//! producer id or a lower sequence). A broker never opens such a gap itself: it delays. A
//! refused batch that does not come back within the client's longest backoff past the time it
//! was told (the retries' claim window) is given up on: the later ones go to the broker, which
//! judges them, rather than waiting for a batch that may have been sent renumbered.

use super::retries::CLAIM_WINDOW_NS;
use super::Batch;

/// Partitions remembered per connection (a producer writes many; the oldest is forgotten).
const REMEMBERED: usize = 64;

/// A batch refused: the first one of its partition's sequence that has not come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Refused {
    partition: u64,
    producer_id: i64,
    base_sequence: i32,
    /// When the client was told it may retry.
    ready_at: u64,
}

#[derive(Debug, Default)]
pub struct Gaps {
    refused: Vec<Refused>,
}

/// Whether sequence `later` comes after `earlier`: within half the sequence space ahead, which
/// wraps from i32::MAX to 0.
fn after(later: i32, earlier: i32) -> bool {
    const SPACE: i64 = i32::MAX as i64 + 1;
    let d = (i64::from(later) - i64::from(earlier)).rem_euclid(SPACE);
    d > 0 && d < SPACE / 2
}

impl Gaps {
    /// If a batch of the request follows one refused and not yet retried, when that one may be
    /// retried (the request must wait as long).
    pub fn blocked(&mut self, batches: &[Batch], now: u64) -> Option<u64> {
        self.refused
            .retain(|r| r.ready_at.saturating_add(CLAIM_WINDOW_NS) > now);
        batches
            .iter()
            .filter(|b| b.producer_id >= 0 && b.base_sequence >= 0)
            .filter_map(|b| {
                self.refused
                    .iter()
                    .find(|r| {
                        r.partition == b.partition
                            && r.producer_id == b.producer_id
                            && after(b.base_sequence, r.base_sequence)
                    })
                    .map(|r| r.ready_at)
            })
            .max()
    }

    /// The request's batches were refused, the client told to wait until `ready_at`.
    pub fn refused(&mut self, batches: &[Batch], ready_at: u64) {
        for b in batches.iter().filter(|b| b.producer_id >= 0 && b.base_sequence >= 0) {
            match self.refused.iter_mut().find(|r| r.partition == b.partition) {
                Some(r) if r.producer_id == b.producer_id && !after(r.base_sequence, b.base_sequence) => {
                    // This one or a later one of a gap already known: wait as long as the last.
                    r.ready_at = r.ready_at.max(ready_at);
                }
                Some(r) => {
                    *r = Refused {
                        partition: b.partition,
                        producer_id: b.producer_id,
                        base_sequence: b.base_sequence,
                        ready_at,
                    }
                }
                None => {
                    if self.refused.len() == REMEMBERED {
                        self.refused.remove(0);
                    }
                    self.refused.push(Refused {
                        partition: b.partition,
                        producer_id: b.producer_id,
                        base_sequence: b.base_sequence,
                        ready_at,
                    });
                }
            }
        }
    }

    /// The request's batches were forwarded: a refused batch that came back, or a sequence
    /// started again, closes its partition's gap.
    pub fn forwarded(&mut self, batches: &[Batch]) {
        self.refused.retain(|r| {
            !batches.iter().any(|b| {
                b.partition == r.partition
                    && (b.producer_id != r.producer_id || !after(b.base_sequence, r.base_sequence))
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Gaps {
        /// blocked() at time 0, before any gap is given up on.
        fn blocked_at(&mut self, batches: &[Batch]) -> Option<u64> {
            self.blocked(batches, 0)
        }
    }

    fn batch(partition: u64, producer_id: i64, base_sequence: i32) -> Batch {
        Batch {
            key: partition ^ (base_sequence as u64) << 32,
            messages: 10,
            bytes: 1000,
            partition,
            producer_id,
            base_sequence,
        }
    }

    #[test]
    fn a_batch_after_a_refused_one_waits_until_it_comes_back() {
        let mut g = Gaps::default();
        g.refused(&[batch(1, 7, 100)], 5_000);
        assert_eq!(g.blocked_at(&[batch(1, 7, 110)]), Some(5_000), "after the gap");
        assert_eq!(g.blocked_at(&[batch(2, 7, 110)]), None, "another partition");
        assert_eq!(g.blocked_at(&[batch(1, 7, 100)]), None, "the refused batch itself");
        assert_eq!(g.blocked_at(&[batch(1, 8, 110)]), None, "another producer");
        assert_eq!(g.blocked_at(&[batch(1, -1, -1)]), None, "not idempotent");
        // A later one refused for the gap waits as long as the latest told.
        g.refused(&[batch(1, 7, 110)], 7_000);
        assert_eq!(g.blocked_at(&[batch(1, 7, 120)]), Some(7_000));
        g.forwarded(&[batch(1, 7, 100)]);
        assert_eq!(g.blocked_at(&[batch(1, 7, 110)]), None, "the retry closed the gap");
    }

    #[test]
    fn a_sequence_started_again_closes_the_gap() {
        let mut g = Gaps::default();
        g.refused(&[batch(1, 7, 100)], 5_000);
        g.forwarded(&[batch(1, 7, 0)]);
        assert_eq!(
            g.blocked_at(&[batch(1, 7, 110)]),
            None,
            "a lower sequence: started again"
        );
        g.refused(&[batch(1, 7, 100)], 5_000);
        g.forwarded(&[batch(1, 9, 0)]);
        assert_eq!(g.blocked_at(&[batch(1, 7, 110)]), None, "a new producer id");
    }

    #[test]
    fn a_refused_batch_that_does_not_come_back_is_given_up_on() {
        let mut g = Gaps::default();
        g.refused(&[batch(1, 7, 100)], 5_000);
        assert_eq!(g.blocked(&[batch(1, 7, 110)], 5_000 + CLAIM_WINDOW_NS - 1), Some(5_000));
        assert_eq!(
            g.blocked(&[batch(1, 7, 110)], 5_000 + CLAIM_WINDOW_NS),
            None,
            "past the claim window"
        );
    }

    #[test]
    fn sequences_wrap() {
        let mut g = Gaps::default();
        g.refused(&[batch(1, 7, i32::MAX - 5)], 5_000);
        assert_eq!(g.blocked_at(&[batch(1, 7, 3)]), Some(5_000), "wrapped past i32::MAX");
    }

    #[test]
    fn memory_is_bounded() {
        let mut g = Gaps::default();
        for p in 0..1000 {
            g.refused(&[batch(p, 7, 1)], 5_000);
        }
        assert_eq!(g.refused.len(), REMEMBERED);
        assert_eq!(g.blocked_at(&[batch(999, 7, 2)]), Some(5_000), "the newest kept");
        assert_eq!(g.blocked_at(&[batch(0, 7, 2)]), None, "the oldest forgotten");
    }
}
