//! GCRA (generic cell rate algorithm): a token bucket kept as a single timestamp, the theoretical
//! arrival time (TAT) at which the bucket would be full again. O(1), one u64 of state.

const NANOS_PER_SECOND: u128 = 1_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    per_second: u64,
    /// How far ahead of now the TAT may run: the bucket depth, in ns.
    tolerance_ns: u64,
}

impl Gcra {
    /// `per_second` units refill per second; the bucket holds `burst` units. None if either is 0.
    pub fn new(per_second: u64, burst: u64) -> Option<Gcra> {
        if per_second == 0 || burst == 0 {
            return None;
        }
        Some(Gcra {
            per_second,
            tolerance_ns: Self::nanos_for(per_second, burst),
        })
    }

    /// The time `units` take to refill, rounded up.
    fn nanos_for(per_second: u64, units: u64) -> u64 {
        let ns = (u128::from(units) * NANOS_PER_SECOND).div_ceil(u128::from(per_second));
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// Takes `cost` units at `now` (ns): the new TAT, or the wait (ns) until it would succeed.
    /// A cost larger than the whole bucket (a Kafka batch of more records than the burst) could
    /// never fit: it is admitted once the bucket is full, and the bucket goes into debt for the
    /// excess, so the long-run rate still holds.
    pub fn check(&self, tat: u64, now: u64, cost: u64) -> Result<u64, u64> {
        let cost_ns = Self::nanos_for(self.per_second, cost);
        if cost_ns > self.tolerance_ns {
            return if tat <= now {
                Ok(now.saturating_add(cost_ns))
            } else {
                Err(tat - now)
            };
        }
        let new_tat = tat.max(now).saturating_add(cost_ns);
        let allowed_at = new_tat.saturating_sub(self.tolerance_ns);
        if allowed_at <= now {
            Ok(new_tat)
        } else {
            Err(allowed_at - now)
        }
    }

    /// The part of the wait for `cost` units at `now` that is pacing rather than queueing: the
    /// debt an earlier batch larger than the bucket left (the time until the bucket is merely
    /// empty), then the refill of the units themselves (a whole bucket for a batch larger than
    /// it). A Kafka batch is the unit its client sends: its own records' time at the rate is
    /// never the reason to refuse it.
    pub fn paced_ns(&self, tat: u64, now: u64, cost: u64) -> u64 {
        let debt = tat.saturating_sub(now.saturating_add(self.tolerance_ns));
        let own = Self::nanos_for(self.per_second, cost).min(self.tolerance_ns);
        debt.saturating_add(own)
    }

    /// Sets `cost` units aside at `now` for a request that was just refused, to be spent by its
    /// retry: the new TAT (as if admitted) and the time from which the units are the retry's —
    /// the time [`Gcra::check`] would have admitted it. None, taking nothing, if that is more than
    /// `horizon_ns` away.
    pub fn reserve(&self, tat: u64, now: u64, cost: u64, horizon_ns: u64) -> Option<(u64, u64)> {
        let cost_ns = Self::nanos_for(self.per_second, cost);
        let ready_at = if cost_ns > self.tolerance_ns {
            tat.max(now)
        } else {
            tat.max(now)
                .saturating_add(cost_ns)
                .saturating_sub(self.tolerance_ns)
                .max(now)
        };
        let new_tat = tat.max(ready_at).saturating_add(cost_ns);
        (ready_at - now <= horizon_ns).then_some((new_tat, ready_at))
    }

    /// Gives back `cost` units taken by [`Gcra::reserve`] and never used.
    pub fn refund(&self, tat: u64, cost: u64) -> u64 {
        tat.saturating_sub(Self::nanos_for(self.per_second, cost))
    }

    /// The time `units` take to refill (what taking them moves the TAT by).
    pub fn cost_ns(&self, units: u64) -> u64 {
        Self::nanos_for(self.per_second, units)
    }

    /// How many units could be taken at `now` without waiting (none while in debt).
    pub fn spare(&self, tat: u64, now: u64) -> u64 {
        let room = now.saturating_add(self.tolerance_ns).saturating_sub(tat.max(now));
        let units = u128::from(room) * u128::from(self.per_second) / NANOS_PER_SECOND;
        u64::try_from(units).unwrap_or(u64::MAX)
    }

    /// The same rate with `held_ns` of its bucket held elsewhere (leased to workers): the
    /// depth left, possibly none.
    pub fn narrowed(&self, held_ns: u64) -> Gcra {
        Gcra {
            per_second: self.per_second,
            tolerance_ns: self.tolerance_ns.saturating_sub(held_ns),
        }
    }

    /// The part `ppm` (of a million) of this rate, with a burst cut in the same proportion: the
    /// bucket's depth in ns is unchanged, so a TAT stays meaningful when the part changes.
    pub fn scaled(&self, ppm: u64) -> Gcra {
        let per_second = u128::from(self.per_second) * u128::from(ppm) / 1_000_000;
        Gcra {
            per_second: u64::try_from(per_second).unwrap_or(u64::MAX).max(1),
            tolerance_ns: self.tolerance_ns,
        }
    }

    /// A TAT of this bucket carried over to `to`, the same bucket at another rate (a global
    /// limit's new share): within the bucket's depth it keeps its time, as the depth does; what
    /// lies beyond is a debt of units (a batch larger than the bucket was admitted), kept as the
    /// same units at the new rate.
    pub fn carried(&self, to: &Gcra, tat: u64, now: u64) -> u64 {
        let edge = now.saturating_add(self.tolerance_ns);
        let debt = tat.saturating_sub(edge);
        if debt == 0 || to.per_second == self.per_second {
            return tat;
        }
        let units_ns = u128::from(debt) * u128::from(self.per_second) / u128::from(to.per_second.max(1));
        edge.saturating_add(u64::try_from(units_ns).unwrap_or(u64::MAX))
    }

    /// Units per second and bucket depth (ns).
    pub fn parameters(&self) -> (u64, u64) {
        (self.per_second, self.tolerance_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000_000_000;

    #[test]
    fn a_full_bucket_admits_its_burst_then_paces_at_the_rate() {
        let g = Gcra::new(100, 10).unwrap_or_else(|| unreachable!());
        let mut tat = 0;
        for i in 0..10 {
            tat = g
                .check(tat, T0, 1)
                .unwrap_or_else(|w| unreachable!("message {i} waited {w}"));
        }
        assert_eq!(
            g.check(tat, T0, 1),
            Err(10_000_000),
            "the 11th waits one interval (10 ms)"
        );
        assert!(g.check(tat, T0 + 10_000_000, 1).is_ok());
    }

    #[test]
    fn a_debt_is_carried_to_another_rate_as_units() {
        // A 100 ms bucket at 300/s, and at a share of 1 ppm: 1 unit/s, the same 100 ms.
        let whole = Gcra::new(300, 30).unwrap_or_else(|| unreachable!());
        let next_to_nothing = whole.scaled(1);
        // A 1-unit message admitted at 1/s leaves 0.9 s beyond the bucket: 3 units' debt.
        let tat = next_to_nothing
            .check(0, T0, 1)
            .unwrap_or_else(|w| unreachable!("waited {w}"));
        assert!(
            whole.check(tat, T0, 1).is_err_and(|w| w > 900_000_000),
            "uncarried, it waits out 0.9 s"
        );
        let carried = next_to_nothing.carried(&whole, tat, T0);
        assert_eq!(carried, T0 + 100_000_000 + 3_000_000, "0.9 s at 1/s is 3 ms at 300/s");
        assert_eq!(whole.carried(&next_to_nothing, carried, T0), tat, "and back");
        let within = T0 + 60_000_000;
        assert_eq!(
            next_to_nothing.carried(&whole, within, T0),
            within,
            "within the bucket, time is kept"
        );
    }

    #[test]
    fn admits_the_configured_rate_over_a_long_run() {
        // Offer 10x the rate for 10 simulated seconds, 1 µs apart: exactly rate*10 + burst pass.
        let g = Gcra::new(1000, 50).unwrap_or_else(|| unreachable!());
        let (mut tat, mut admitted) = (0, 0u64);
        let mut now = T0;
        while now < T0 + 10_000_000_000 {
            if let Ok(t) = g.check(tat, now, 1) {
                tat = t;
                admitted += 1;
            }
            now += 100_000; // 10,000 offered per second
        }
        assert!((10_000..=10_051).contains(&admitted), "admitted {admitted}");
    }

    #[test]
    fn a_cost_larger_than_the_bucket_waits_for_a_full_bucket_then_goes_into_debt() {
        let g = Gcra::new(100, 10).unwrap_or_else(|| unreachable!());
        let tat = g
            .check(0, T0, 30)
            .unwrap_or_else(|w| unreachable!("a full bucket waited {w}"));
        assert_eq!(tat, T0 + 300_000_000, "30 units at 100/s cost 300 ms of debt");
        assert_eq!(
            g.check(tat, T0, 1),
            Err(210_000_000),
            "nothing more until the debt is paid down to the burst"
        );
        assert!(g.check(tat, T0 + 300_000_000, 30).is_ok());
        assert_eq!(
            g.paced_ns(tat, T0, 1),
            210_000_000,
            "a message waits out the debt, then its own refill"
        );
        assert_eq!(g.paced_ns(tat, T0 + 250_000_000, 1), 10_000_000, "no debt left");
        assert_eq!(
            g.paced_ns(tat, T0 + 250_000_000, 30),
            100_000_000,
            "a batch larger than the bucket needs it full"
        );
    }

    #[test]
    fn a_reservation_is_ready_when_a_check_would_have_admitted_it() {
        let g = Gcra::new(100, 10).unwrap_or_else(|| unreachable!());
        let mut tat = 0;
        for _ in 0..10 {
            tat = g.check(tat, T0, 1).unwrap_or_else(|w| unreachable!("waited {w}"));
        }
        let wait = g.check(tat, T0, 5).err().unwrap_or_default();
        let (reserved, ready_at) = g.reserve(tat, T0, 5, 1_000_000_000).unwrap_or_else(|| unreachable!());
        assert_eq!(
            ready_at,
            T0 + wait,
            "ready when the refused request would have been admitted"
        );
        assert_eq!(reserved, tat + 50_000_000);
        assert_eq!(
            g.check(reserved, ready_at, 1),
            Err(10_000_000),
            "what was reserved is not admitted to anyone else"
        );
        assert_eq!(
            g.reserve(tat, T0, 5, wait - 1),
            None,
            "beyond the horizon nothing is set aside"
        );
        assert_eq!(g.refund(reserved, 5), tat);
    }

    #[test]
    fn spare_is_what_a_check_would_admit_now() {
        let g = Gcra::new(100, 10).unwrap_or_else(|| unreachable!());
        assert_eq!(g.spare(0, T0), 10, "a full bucket");
        let tat = g.check(0, T0, 7).unwrap_or_else(|w| unreachable!("waited {w}"));
        assert_eq!(g.spare(tat, T0), 3);
        assert!(g.check(tat, T0, 3).is_ok() && g.check(tat, T0, 4).is_err());
        assert_eq!(g.spare(tat, T0 + 20_000_000), 5, "two more refilled");
        let debt = g.check(0, T0, 30).unwrap_or_else(|w| unreachable!("waited {w}"));
        assert_eq!(g.spare(debt, T0 + 100_000_000), 0, "nothing while in debt");
        assert_eq!(g.narrowed(50_000_000).spare(0, T0), 5, "half the depth held elsewhere");
        assert_eq!(g.narrowed(u64::MAX).spare(0, T0), 0);
    }

    #[test]
    fn reserving_a_batch_larger_than_the_bucket_waits_for_a_full_bucket() {
        let g = Gcra::new(100, 10).unwrap_or_else(|| unreachable!());
        let tat = T0 + 40_000_000;
        let (reserved, ready_at) = g.reserve(tat, T0, 30, u64::MAX).unwrap_or_else(|| unreachable!());
        assert_eq!((ready_at, reserved), (tat, tat + 300_000_000));
        assert_eq!(
            g.check(tat, ready_at, 30),
            Ok(reserved),
            "the same as a check at ready_at"
        );
    }

    #[test]
    fn zero_rates_are_not_limits() {
        assert_eq!(Gcra::new(0, 5), None);
        assert_eq!(Gcra::new(5, 0), None);
    }

    #[test]
    fn fractional_intervals_do_not_drift() {
        // 64 MiB/s is 14.9 ns per byte: rounding up per check costs < 1 ns per message.
        let g = Gcra::new(64 << 20, 64 << 20).unwrap_or_else(|| unreachable!());
        let (mut tat, mut now, mut bytes) = (0u64, T0, 0u64);
        while now < T0 + 2_000_000_000 {
            match g.check(tat, now, 1000) {
                Ok(t) => {
                    tat = t;
                    bytes += 1000;
                }
                Err(w) => now += w,
            }
        }
        let expected = 3 * (64u64 << 20); // burst + 2 s of rate
        assert!(
            bytes.abs_diff(expected) < expected / 1000,
            "bytes {bytes} vs {expected}"
        );
    }
}
