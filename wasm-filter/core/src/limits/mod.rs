//! The limiter core shared by NATS and Kafka: one small type per limit. Each limiter is a pure
//! function of its stored state, so the glue can keep that state wherever it must be shared
//! (Envoy shared data, updated by compare-and-swap across worker VMs) and tests can drive it with
//! a fake clock.

mod gcra;
mod reason;
mod resolved;

pub use gcra::Gcra;
pub use reason::Reason;
pub use resolved::Limits;

/// A message and a byte bucket that must both admit a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateLimit {
    pub messages: Option<Gcra>,
    pub bytes: Option<Gcra>,
}

/// The state of a [`RateLimit`]: each bucket's theoretical arrival time, in ns.
pub type RateState = [u64; 2];

impl RateLimit {
    /// From (per second, burst) of messages and of bytes; None or a zero is no limit.
    pub fn new(messages: Option<(u64, u64)>, bytes: Option<(u64, u64)>) -> RateLimit {
        let bucket = |b: Option<(u64, u64)>| b.and_then(|(rate, burst)| Gcra::new(rate, burst));
        RateLimit {
            messages: bucket(messages),
            bytes: bucket(bytes),
        }
    }

    /// The part `ppm` (of a million) of both buckets (see [`Gcra::scaled`]).
    pub fn scaled(&self, ppm: u64) -> RateLimit {
        RateLimit {
            messages: self.messages.map(|g| g.scaled(ppm)),
            bytes: self.bytes.map(|g| g.scaled(ppm)),
        }
    }

    pub fn is_unlimited(&self) -> bool {
        self.messages.is_none() && self.bytes.is_none()
    }

    /// Admits one message of `size` bytes at `now`: the new state, or how long until it could be
    /// admitted (ns). Nothing is taken from either bucket unless both admit.
    pub fn check(&self, state: RateState, now: u64, size: u64) -> Result<RateState, u64> {
        self.check_batch(state, now, 1, size)
    }

    /// Admits `messages` messages (a Kafka record batch) totalling `size` bytes, in O(1).
    pub fn check_batch(&self, state: RateState, now: u64, messages: u64, size: u64) -> Result<RateState, u64> {
        let m = match self.messages {
            Some(g) => g.check(state[0], now, messages),
            None => Ok(state[0]),
        };
        let b = match self.bytes {
            Some(g) => g.check(state[1], now, size),
            None => Ok(state[1]),
        };
        match (m, b) {
            (Ok(m), Ok(b)) => Ok([m, b]),
            (Err(a), Err(b)) => Err(a.max(b)),
            (Err(w), _) | (_, Err(w)) => Err(w),
        }
    }

    /// The larger of the two buckets' [`Gcra::paced_ns`] for a batch.
    pub fn paced_ns(&self, state: RateState, now: u64, messages: u64, size: u64) -> u64 {
        let m = self.messages.map_or(0, |g| g.paced_ns(state[0], now, messages));
        let b = self.bytes.map_or(0, |g| g.paced_ns(state[1], now, size));
        m.max(b)
    }

    /// Sets aside what `check_batch` refused, for the refused request's retry (see
    /// [`Gcra::reserve`]): the new state and when the retry may spend it — the later of the two
    /// buckets. None, taking nothing, if that is beyond `horizon_ns`.
    pub fn reserve_batch(
        &self,
        state: RateState,
        now: u64,
        messages: u64,
        size: u64,
        horizon_ns: u64,
    ) -> Option<(RateState, u64)> {
        let reserve = |g: Option<Gcra>, tat: u64, cost: u64| match g {
            Some(g) => g.reserve(tat, now, cost, horizon_ns),
            None => Some((tat, now)),
        };
        let (m, m_ready) = reserve(self.messages, state[0], messages)?;
        let (b, b_ready) = reserve(self.bytes, state[1], size)?;
        Some(([m, b], m_ready.max(b_ready)))
    }

    /// Gives back a reservation that will not be spent.
    pub fn refund_batch(&self, state: RateState, messages: u64, size: u64) -> RateState {
        [
            self.messages.map_or(state[0], |g| g.refund(state[0], messages)),
            self.bytes.map_or(state[1], |g| g.refund(state[1], size)),
        ]
    }

    /// Identifies the parameters, so state is kept across reloads only while they are unchanged.
    pub fn fingerprint(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for g in [self.messages, self.bytes] {
            let (a, b) = g.map(|g| g.parameters()).unwrap_or((0, 0));
            for v in [a, b] {
                h = (h ^ v).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(mps: Option<u64>, bps: Option<u64>, burst_m: Option<u64>, burst_b: Option<u64>) -> RateLimit {
        RateLimit::new(
            mps.map(|r| (r, burst_m.unwrap_or(r))),
            bps.map(|r| (r, burst_b.unwrap_or(r))),
        )
    }

    #[test]
    fn both_buckets_must_admit_and_a_refusal_takes_nothing() {
        let r = limits(Some(10), Some(100), Some(10), Some(100));
        let now = 1_000_000_000_000;
        let s = r.check([0, 0], now, 60).unwrap_or_default();
        // 60 of 100 bytes used: a 50-byte message fails on bytes though messages would admit it.
        let wait = r.check(s, now, 50).err().unwrap_or_default();
        assert!(wait > 0);
        assert_eq!(
            r.check(s, now, 40).map(|_| ()),
            Ok(()),
            "the refused check took nothing"
        );
    }

    #[test]
    fn a_batch_costs_its_record_count() {
        let r = limits(Some(100), None, Some(10), None);
        let s = r.check_batch([0, 0], 1_000_000_000_000, 10, 5000).unwrap();
        assert!(
            r.check(s, 1_000_000_000_000, 1).is_err(),
            "ten records emptied a ten-deep bucket"
        );
        let big = r.check_batch([0, 0], 1_000_000_000_000, 11, 1).unwrap();
        assert!(
            r.check(big, 1_000_000_000_000, 1).is_err(),
            "a batch over the burst leaves the bucket in debt"
        );
    }

    #[test]
    fn unlimited_admits_everything_and_fingerprints_differ_by_parameters() {
        let none = RateLimit::default();
        assert!(none.is_unlimited());
        assert_eq!(none.check([5, 6], 1, u64::MAX), Ok([5, 6]));
        let a = limits(Some(10), None, None, None);
        let b = limits(Some(11), None, None, None);
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint(), limits(Some(10), None, Some(10), None).fingerprint());
    }
}
