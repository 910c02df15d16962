//! What the gateway owes one client and has not handed to Envoy yet, and what becomes of a client
//! that does not take it.
//!
//! The gateway answers a client on its own in two places: a refused NATS message (its `-ERR`
//! rides on the PONG of a PING sent in its place) and a refused Kafka Produce (its response takes
//! the place of the broker's answer to a stand-in request). While the client reads, those answers
//! flow out as soon as the broker's bytes carrying them arrive. When it does not, Envoy's write
//! buffer toward it fills to the listener's per-connection buffer limit, Envoy stops reading the
//! broker (tcp_proxy's watermarks), and the answers pile up here instead: proxy-wasm says nothing
//! of what Envoy has written, but a backlog that only grows says the client is not reading.
//!
//! So each connection's backlog is bounded ([`Backlog::limit`], the chart's per-connection buffer
//! budget): past it the glue reads nothing more from the client (it is held, as a delayed message
//! is, and TCP pushes back on it), so nothing is refused that could not be reported. A client that
//! takes nothing for [`BacklogPolicy::deadline_ns`] while past the bound is a slow consumer: the
//! glue closes it, as nats-server closes one whose writes stall for its write deadline.
//!
//! A Kafka broker mutes a connection whose responses are unsent, so behind a client that does not
//! read, Envoy may stop reading the client (its buffer toward the broker full) before the bound is
//! reached: nothing more is owed, and nothing is held by the filter. So a Kafka connection is
//! watched whenever anything is owed ([`Backlog::watching_anything`]): one that takes nothing of
//! it for the deadline is a slow consumer too. (A NATS client is owed a PONG for every PING it
//! has in flight: watching those would put every connection on the wait list.)

use serde::Deserialize;

/// The bound and the slow-consumer deadline, from the filter configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BacklogPolicy {
    /// Bytes owed to one client past which it is held.
    pub max_bytes: u64,
    /// How long a held client may take nothing before it is closed.
    pub deadline_ms: u64,
}

impl Default for BacklogPolicy {
    /// Envoy's per-connection buffer in the chart's default, and nats-server's write deadline.
    fn default() -> Self {
        BacklogPolicy {
            max_bytes: 32 << 10,
            deadline_ms: 10_000,
        }
    }
}

impl BacklogPolicy {
    pub fn deadline_ns(&self) -> u64 {
        self.deadline_ms.saturating_mul(1_000_000)
    }
}

/// Where a connection stands with its backlog at a given moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Under the bound: its bytes are read as usual.
    Open,
    /// Past the bound: read nothing more from it; check again at `until` if nothing changes.
    Held { until: u64 },
    /// Owed something, under the bound, watched: check again at `until` if nothing changes.
    Owing { until: u64 },
    /// Past the bound and took nothing for the whole deadline: close it.
    SlowConsumer,
}

/// One connection's backlog.
#[derive(Debug)]
pub struct Backlog {
    owed: u64,
    /// Everything ever paid: a change since `stalled` began is progress.
    paid: u64,
    limit: u64,
    /// The most the glue carries behind a held operation (weighstation_core::carry).
    carry: usize,
    /// Anything owed starts the deadline, not only past the bound.
    watch_anything: bool,
    /// Since when it has been past the bound, and what had been paid then.
    stalled: Option<(u64, u64)>,
    /// A hold was reported and not yet released.
    holding: bool,
}

impl Default for Backlog {
    fn default() -> Self {
        Backlog::new(BacklogPolicy::default().max_bytes)
    }
}

impl Backlog {
    pub fn new(limit: u64) -> Self {
        Backlog {
            owed: 0,
            paid: 0,
            limit,
            carry: usize::MAX,
            watch_anything: false,
            stalled: None,
            holding: false,
        }
    }

    /// The most the glue carries behind a held operation; see [`Backlog::holds`].
    pub fn carrying(mut self, carry: usize) -> Self {
        self.carry = carry;
        self
    }

    pub fn set_limit(&mut self, limit: u64) {
        self.limit = limit;
    }

    /// The gateway will send the client `bytes` of its own.
    pub fn owe(&mut self, bytes: usize) {
        self.owed = self.owed.saturating_add(bytes as u64);
    }

    /// `bytes` of what was owed were handed to Envoy for the client.
    pub fn paid(&mut self, bytes: usize) {
        let bytes = (bytes as u64).min(self.owed);
        self.owed -= bytes;
        self.paid = self.paid.wrapping_add(bytes);
    }

    pub fn owed(&self) -> u64 {
        self.owed
    }

    /// Past the bound: nothing more is read from the client.
    pub fn over(&self) -> bool {
        self.owed > 0 && self.owed >= self.limit
    }

    /// Anything owed starts the deadline (Kafka; see the module's comment).
    pub fn watching_anything(mut self) -> Self {
        self.watch_anything = true;
        self
    }

    /// Whether to hold the operation at `at` in the scanned input, `rest` bytes of it from the
    /// operation on. Past the bound — but a hold whose bytes behind do not fit the carry forwards
    /// nothing decided ahead of it (crate::carry), and among those are the stand-ins whose answers
    /// would pay what is owed: the client would wait for nothing. So an operation with decided
    /// bytes ahead of it is held only where what follows fits the carry; otherwise the input is
    /// decided on, and the next one held at its start. At most one read more than the bound is
    /// owed.
    pub fn holds(&self, at: usize, rest: usize) -> bool {
        self.over() && (at == 0 || rest <= self.carry)
    }

    /// Where the connection stands at `now`, given the deadline; remembers a hold so that
    /// [`Backlog::released`] can say when it ends.
    pub fn standing(&mut self, now: u64, deadline_ns: u64) -> Standing {
        let over = self.over();
        if self.owed == 0 || !over && !self.watch_anything {
            self.stalled = None;
            return Standing::Open;
        }
        self.holding |= over;
        let (since, paid) = match self.stalled {
            Some((since, paid)) if paid == self.paid => (since, paid),
            _ => (now, self.paid), // first time past the bound, or it took something since
        };
        self.stalled = Some((since, paid));
        let until = since.saturating_add(deadline_ns);
        if now >= until {
            return Standing::SlowConsumer;
        }
        match over {
            true => Standing::Held { until },
            false => Standing::Owing { until },
        }
    }

    /// True once after a hold, when the backlog is back under the bound: the held bytes are
    /// decided at once rather than at the next check.
    pub fn released(&mut self) -> bool {
        if self.holding && !self.over() {
            self.holding = false;
            self.stalled = None;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEADLINE: u64 = 10_000;

    #[test]
    fn a_client_under_the_bound_is_read() {
        let mut b = Backlog::new(100);
        b.owe(99);
        assert!(!b.over());
        assert_eq!(b.standing(0, DEADLINE), Standing::Open);
        assert!(!b.released());
    }

    #[test]
    fn past_the_bound_it_is_held_until_the_deadline_then_a_slow_consumer() {
        let mut b = Backlog::new(100);
        b.owe(100);
        assert_eq!(b.standing(5, DEADLINE), Standing::Held { until: 5 + DEADLINE });
        assert_eq!(
            b.standing(5 + DEADLINE - 1, DEADLINE),
            Standing::Held { until: 5 + DEADLINE }
        );
        assert_eq!(b.standing(5 + DEADLINE, DEADLINE), Standing::SlowConsumer);
    }

    #[test]
    fn anything_taken_restarts_the_deadline() {
        let mut b = Backlog::new(100);
        b.owe(300);
        assert_eq!(b.standing(0, DEADLINE), Standing::Held { until: DEADLINE });
        b.paid(50); // still past the bound, but the client took something
        assert_eq!(b.standing(DEADLINE, DEADLINE), Standing::Held { until: 2 * DEADLINE });
        assert_eq!(b.standing(2 * DEADLINE, DEADLINE), Standing::SlowConsumer);
    }

    #[test]
    fn a_hold_is_released_once_the_backlog_is_under_the_bound() {
        let mut b = Backlog::new(100);
        b.owe(150);
        assert!(matches!(b.standing(0, DEADLINE), Standing::Held { .. }));
        assert!(!b.released());
        b.paid(51);
        assert!(b.released());
        assert!(!b.released(), "only once");
        assert_eq!(b.standing(DEADLINE * 3, DEADLINE), Standing::Open);
    }

    #[test]
    fn a_hold_behind_decided_bytes_waits_until_what_follows_fits_the_carry() {
        let mut b = Backlog::new(10).carrying(100);
        assert!(!b.holds(0, 50), "under the bound");
        b.owe(10);
        assert!(b.holds(0, 1000), "nothing decided ahead: held, whatever follows");
        assert!(!b.holds(1, 101), "its bytes behind would not fit: decided as usual");
        assert!(b.holds(1, 100));
    }

    #[test]
    fn watching_anything_owed_starts_the_deadline_under_the_bound() {
        let mut b = Backlog::new(100).watching_anything();
        assert_eq!(b.standing(0, DEADLINE), Standing::Open);
        b.owe(1);
        assert_eq!(b.standing(0, DEADLINE), Standing::Owing { until: DEADLINE });
        assert!(!b.holds(0, 0), "under the bound nothing is held");
        assert_eq!(b.standing(DEADLINE, DEADLINE), Standing::SlowConsumer);
        b.paid(1);
        assert_eq!(b.standing(DEADLINE, DEADLINE), Standing::Open);
        let mut unwatched = Backlog::new(100);
        unwatched.owe(1);
        assert_eq!(unwatched.standing(0, DEADLINE), Standing::Open);
    }

    #[test]
    fn paying_more_than_owed_owes_nothing() {
        let mut b = Backlog::new(100);
        b.owe(10);
        b.paid(20);
        assert_eq!(b.owed(), 0);
        b.owe(100);
        assert!(b.over());
    }

    #[test]
    fn a_zero_bound_holds_only_what_is_owed() {
        let mut b = Backlog::new(0);
        assert!(!b.over(), "owing nothing is never past a bound");
        b.owe(1);
        assert!(b.over());
    }
}
