//! The read side's bucket (limits.consume). What a consumer receives cannot be refused once the
//! broker has sent it, so it is charged after the fact and may take the bucket into debt; the
//! consumer then waits the debt out before it may ask again — Kafka's own consumer quota
//! (KIP-13, KIP-219): the response goes out with throttle_time_ms, and the next fetch waits.
//! The state is one GCRA timestamp, shared like a rate's.

use crate::limits::{Gcra, Limits};
use crate::protocol::Protocol;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumeLimit {
    bucket: Gcra,
    /// The bucket's depth in bytes: the most one fetch may ask for.
    burst: u64,
}

impl ConsumeLimit {
    /// `per_second` bytes refill per second into a bucket of `burst` bytes; None if either is 0.
    pub fn new(per_second: u64, burst: u64) -> Option<ConsumeLimit> {
        Some(ConsumeLimit {
            bucket: Gcra::new(per_second, burst)?,
            burst,
        })
    }

    /// A limit's byte bucket (consume.bytesPerSecond); a burst left out is one second of its
    /// rate.
    pub fn bytes_of(l: &Limits) -> Option<ConsumeLimit> {
        let rate = l.consume_bytes_per_second?;
        ConsumeLimit::new(rate, l.consume_burst_bytes.unwrap_or(rate))
    }

    /// A limit's bucket of NATS deliveries (consume.messagesPerSecond), one second deep; none on
    /// Kafka, whose consumers are limited by bytes.
    pub fn messages_of(protocol: Protocol, l: &Limits) -> Option<ConsumeLimit> {
        let rate = l.consume_messages_per_second.filter(|_| protocol == Protocol::Nats)?;
        ConsumeLimit::new(rate, rate)
    }

    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Charges `bytes` received at `now` to the bucket whose TAT is `tat`: the new TAT.
    pub fn charge(&self, tat: u64, now: u64, bytes: u64) -> u64 {
        tat.max(now).saturating_add(self.bucket.cost_ns(bytes))
    }

    /// Gives back `bytes` charged before (a provisional charge that was too large); the bucket
    /// never gains more than it had at `now`.
    pub fn refund(&self, tat: u64, now: u64, bytes: u64) -> u64 {
        self.bucket.refund(tat, bytes).max(now.min(tat))
    }

    /// How long until the bucket is out of debt (ns): 0 when a consumer may ask again.
    pub fn wait_ns(&self, tat: u64, now: u64) -> u64 {
        let (_, depth_ns) = self.bucket.parameters();
        tat.saturating_sub(now.saturating_add(depth_ns))
    }

    /// Identifies the parameters, to key the shared state (see limits::RateLimit::fingerprint).
    pub fn fingerprint(&self) -> u64 {
        let (a, b) = self.bucket.parameters();
        [a, b]
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, v| (h ^ v).wrapping_mul(0x0100_0000_01b3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_full_bucket_takes_its_burst_without_debt_and_then_waits() {
        let c = ConsumeLimit::new(1000, 1000).unwrap_or_else(|| panic!("a limit"));
        let now = 100 * S;
        let tat = c.charge(0, now, 1000);
        assert_eq!(c.wait_ns(tat, now), 0, "one burst is no debt");
        let tat = c.charge(tat, now, 500);
        assert_eq!(c.wait_ns(tat, now), S / 2, "half a second of debt");
        assert_eq!(c.wait_ns(tat, now + S / 2), 0);
    }

    #[test]
    fn a_refund_never_gives_more_than_the_bucket_had() {
        let c = ConsumeLimit::new(1000, 1000).unwrap_or_else(|| panic!("a limit"));
        let now = 100 * S;
        let tat = c.charge(0, now, 300);
        assert_eq!(c.refund(tat, now, 200), c.charge(0, now, 100));
        assert_eq!(c.refund(tat, now, 10_000), now, "an empty charge leaves a full bucket");
    }

    proptest! {
        /// Consumers that fetch only when the bucket is out of debt receive at most the burst
        /// plus one response beyond the rate over any run, and the rate when they keep asking.
        #[test]
        fn received_stays_within_rate_times_time_plus_burst_plus_one_response(
            rate in 1_000u64..10_000_000,
            burst_s in 1u64..4,
            responses in proptest::collection::vec(1u64..4_000_000, 1..200),
        ) {
            let c = ConsumeLimit::new(rate, rate * burst_s).unwrap_or_else(|| panic!("a limit"));
            let (mut tat, mut now, mut received) = (0u64, 1_000 * S, 0u64);
            let start = now;
            let largest = responses.iter().copied().max().unwrap_or(0);
            for r in responses {
                now += c.wait_ns(tat, now);
                tat = c.charge(tat, now, r);
                received += r;
            }
            let elapsed = (now - start) as u128;
            let allowed = elapsed * u128::from(rate) / u128::from(S) + u128::from(rate * burst_s + largest) + 1;
            prop_assert!(u128::from(received) <= allowed, "received {received}, allowed {allowed}");
        }
    }
}
