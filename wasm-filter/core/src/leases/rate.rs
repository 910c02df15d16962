//! Rate tokens in blocks. [`SharedRate`] is a rate limit's state in shared data: each bucket's
//! TAT and how much of each bucket workers hold. [`RateLease`] is one worker's block.
//!
//! Held tokens were taken from the bucket (the TAT moved past them) but not yet spent. Every
//! operation sees the bucket narrowed by them (`Gcra::narrowed`): its depth less what is held.
//! So tokens in the bucket plus tokens in hands never exceed the burst, and a tenant's admitted
//! total over any window of length T is at most burst + rate × T, as without leases.
//!
//! Holds are recorded by the epoch (of [`EPOCH_NS`]) they were granted in. A lease may be spent
//! in its epoch and the next; then it lapses, and the shared state forgets it when the epoch
//! rolls over twice — so a worker that never gives a lease back (its VM was replaced) cannot
//! keep part of the bucket forever. A lease given back in time returns its unspent tokens.
//!
//! A limit of global scope is enforced by each replica for its share of it (the second level of
//! the lease hierarchy, crate::quota): the shared state keeps the share the quota service last
//! gave and until when it holds, and what the process admitted, refused and held back, for the
//! next report (its demand). Without a current share a replica enforces limit ÷ live replicas.

use crate::limits::{Gcra, RateLimit, RateState};

/// Leases are granted for this epoch and the next: they last 50 to 100 ms.
pub const EPOCH_NS: u64 = 50_000_000;

/// A block is sized to about this long of the worker's own recent demand, so a worker's lease
/// lasts a few ms whatever its share of the tenant's traffic, and a worker that goes quiet
/// holds little.
const LEASE_NS: u64 = 5_000_000;

/// And never more than this long of the rate or this share of the burst: the tokens one
/// worker holds are kept from the others.
const MAX_BLOCK_NS: u64 = 5_000_000;
const MAX_SHARE_OF_BURST: u64 = 8;

/// Words of [`SharedRate`] in shared data.
pub const SHARED_RATE_WORDS: usize = 15;

/// Parts of a limit are counted in millionths.
pub const PPM: u64 = 1_000_000;

/// Whom a limit is for: this Envoy process alone, or every replica together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    #[default]
    PerGateway,
    /// Shared among the gateway's replicas, `replicas` of which are live (the control plane's
    /// count, what a replica falls back to without a share from the quota service).
    Global { replicas: u64 },
}

/// What a process did under a limit since the last report: units admitted and refused per bucket
/// (messages, bytes), how long its messages were held back in all, and whether anything was held
/// back or refused. A refusal of a held message (delay) is counted again at each retry, so
/// `refused` means demand only for a tenant that rejects; `waited_ns` is what delay has instead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub admitted: [u64; 2],
    pub refused: [u64; 2],
    pub waited_ns: u64,
    pub saturated: bool,
}

/// Refusals are written to the shared state at most this often (the write costs a host call);
/// meanwhile each worker counts its own in its lease.
const SATURATION_RECORD_NS: u64 = 100_000_000;

/// A rate limit's shared state (one per tenant or override, per Envoy process).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SharedRate {
    /// Each bucket's TAT, counting the tokens workers hold as taken.
    tat: [u64; 2],
    /// Per bucket, the ns of it held in leases granted in the current and the previous epoch.
    held: [[u64; 2]; 2],
    epoch: u64,
    /// This replica's share of a global limit (ppm), valid until `share_until` (ns).
    share_ppm: u64,
    share_until: u64,
    /// Since the last report: units admitted and refused, the time messages waited, and when a
    /// message was last held back or refused.
    admitted: [u64; 2],
    saturated_at: u64,
    refused: [u64; 2],
    waited_ns: u64,
}

/// Why a message was not admitted: the wait until it could be, and the part of that wait that
/// is pacing (see `Gcra::paced_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub wait_ns: u64,
    pub paced_ns: u64,
}

/// What a renewal gave the worker beyond the message's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    units: [u64; 2],
    held_ns: [u64; 2],
    epoch: u64,
}

fn buckets(limit: &RateLimit) -> [Option<Gcra>; 2] {
    [limit.messages, limit.bytes]
}

impl SharedRate {
    pub fn decode(w: [u64; SHARED_RATE_WORDS]) -> SharedRate {
        SharedRate {
            tat: [w[0], w[1]],
            held: [[w[2], w[3]], [w[4], w[5]]],
            epoch: w[6],
            share_ppm: w[7],
            share_until: w[8],
            admitted: [w[9], w[10]],
            saturated_at: w[11],
            refused: [w[12], w[13]],
            waited_ns: w[14],
        }
    }

    pub fn encode(&self) -> [u64; SHARED_RATE_WORDS] {
        let [[m0, m1], [b0, b1]] = self.held;
        let [a0, a1] = self.admitted;
        let [r0, r1] = self.refused;
        let s = self;
        [
            s.tat[0],
            s.tat[1],
            m0,
            m1,
            b0,
            b1,
            s.epoch,
            s.share_ppm,
            s.share_until,
            a0,
            a1,
            s.saturated_at,
            r0,
            r1,
            s.waited_ns,
        ]
    }

    /// The limit this process enforces at `now`: all of it, or its part of a global one — the
    /// quota service's share while it holds, else an even part.
    fn local(&self, limit: &RateLimit, scope: Scope, now: u64) -> RateLimit {
        match scope {
            Scope::PerGateway => *limit,
            Scope::Global { .. } if now < self.share_until => limit.scaled(self.share_ppm.clamp(1, PPM)),
            Scope::Global { replicas } => limit.scaled(PPM / replicas.max(1)),
        }
    }

    /// Records the quota service's answer: this process's share of the limit until `until`.
    pub fn with_share(
        shared: [u64; SHARED_RATE_WORDS],
        limit: &RateLimit,
        scope: Scope,
        ppm: u64,
        until: u64,
        now: u64,
    ) -> [u64; SHARED_RATE_WORDS] {
        SharedRate::decode(shared)
            .reshared(limit, scope, now, |s| {
                s.share_ppm = ppm.clamp(1, PPM);
                s.share_until = until;
            })
            .encode()
    }

    /// Drops the share: the quota service could not be asked, the process falls back at once.
    pub fn without_share(
        shared: [u64; SHARED_RATE_WORDS],
        limit: &RateLimit,
        scope: Scope,
        now: u64,
    ) -> [u64; SHARED_RATE_WORDS] {
        SharedRate::decode(shared)
            .reshared(limit, scope, now, |s| s.share_until = 0)
            .encode()
    }

    /// Applies a change of share, carrying each bucket's debt over to the new rate
    /// (`Gcra::carried`): a message admitted larger than the bucket while the share was next to
    /// nothing — a replica whose clients were idle at its last report is given none — must not
    /// hold the replica, once its share is back, for what it cost at that share.
    fn reshared(mut self, limit: &RateLimit, scope: Scope, now: u64, change: impl FnOnce(&mut Self)) -> Self {
        let before = self.enforced(limit, scope, now);
        change(&mut self);
        let after = self.local(limit, scope, now);
        self.carry(&before, &after, now);
        self
    }

    /// The limit this process enforces at `now` ([`SharedRate::local`]), once a share that ran
    /// out (no answer renewed it: the leader changed, or the store left the limit out) has
    /// lapsed to the even part with its debt carried over, as a new share's is.
    fn enforced(&mut self, limit: &RateLimit, scope: Scope, now: u64) -> RateLimit {
        if matches!(scope, Scope::Global { .. }) && self.share_until != 0 && now >= self.share_until {
            let shared = limit.scaled(self.share_ppm.clamp(1, PPM));
            self.share_until = 0;
            let even = self.local(limit, scope, now);
            self.carry(&shared, &even, now);
        }
        self.local(limit, scope, now)
    }

    fn carry(&mut self, from: &RateLimit, to: &RateLimit, now: u64) {
        for (d, (from, to)) in buckets(from).into_iter().zip(buckets(to)).enumerate() {
            if let (Some(from), Some(to)) = (from, to) {
                self.tat[d] = from.carried(&to, self.tat[d], now);
            }
        }
    }

    /// Takes what was admitted, refused and waited since the last report (zeroing it), and
    /// whether anything was held back since `since`.
    pub fn take_usage(shared: [u64; SHARED_RATE_WORDS], since: u64) -> ([u64; SHARED_RATE_WORDS], Usage) {
        let mut s = SharedRate::decode(shared);
        let usage = Usage {
            admitted: std::mem::take(&mut s.admitted),
            refused: std::mem::take(&mut s.refused),
            waited_ns: std::mem::take(&mut s.waited_ns),
            saturated: s.saturated_at >= since && s.saturated_at != 0,
        };
        (s.encode(), usage)
    }

    fn add_refusals(&mut self, r: &Unreported) {
        for d in 0..2 {
            self.refused[d] = self.refused[d].saturating_add(r.refused[d]);
        }
        self.waited_ns = self.waited_ns.saturating_add(r.waited_ns);
    }

    /// Whether the bucket is full at `now`: no worker holds a lease on it and every bucket's
    /// TAT has passed (a client pool's slot may then change hands, crate::clients::pool).
    pub fn refilled(shared: [u64; SHARED_RATE_WORDS], now: u64) -> bool {
        let mut s = SharedRate::decode(shared);
        s.roll(now);
        s.held_ns(0) == 0 && s.held_ns(1) == 0 && s.tat.iter().all(|&t| t <= now)
    }

    fn roll(&mut self, now: u64) {
        let e = now / EPOCH_NS;
        if e == self.epoch {
            return;
        }
        for h in &mut self.held {
            h[1] = if e == self.epoch + 1 { h[0] } else { 0 };
            h[0] = 0;
        }
        self.epoch = e;
    }

    fn held_ns(&self, d: usize) -> u64 {
        self.held[d][0].saturating_add(self.held[d][1])
    }

    /// The `local` limit (see [`SharedRate::local`]) as it stands at `now` for whoever is not
    /// holding a lease: each bucket narrowed by what is held, with the TATs that go with it.
    fn view(&mut self, local: &RateLimit, now: u64) -> (RateLimit, RateState) {
        self.roll(now);
        let narrowed = RateLimit {
            messages: local.messages.map(|g| g.narrowed(self.held_ns(0))),
            bytes: local.bytes.map(|g| g.narrowed(self.held_ns(1))),
        };
        let tat = [0, 1].map(|d| self.tat[d].saturating_sub(self.held_ns(d)));
        (narrowed, tat)
    }

    /// Stores TATs computed on the view.
    fn set(&mut self, viewed: RateState) {
        self.tat = [0, 1].map(|d| viewed[d].saturating_add(self.held_ns(d)));
    }

    /// Takes `messages` and `bytes` (a message or a Kafka batch), and up to `block` more units
    /// of each bucket to hold. The units granted to hold, or the refusal.
    fn take(
        &mut self,
        local: &RateLimit,
        now: u64,
        messages: u64,
        bytes: u64,
        block: [u64; 2],
    ) -> Result<[u64; 2], Refusal> {
        let (narrowed, tat) = self.view(local, now);
        let mut next = narrowed
            .check_batch(tat, now, messages, bytes)
            .map_err(|wait_ns| Refusal {
                wait_ns,
                paced_ns: narrowed.paced_ns(tat, now, messages, bytes),
            })?;
        let mut units = [0; 2];
        for (d, g) in buckets(&narrowed).into_iter().enumerate() {
            if let Some(g) = g {
                units[d] = block[d].min(g.spare(next[d], now));
                next[d] = next[d].saturating_add(g.cost_ns(units[d]));
            }
        }
        self.set(next);
        Ok(units)
    }

    /// Forgets a lease granted in `epoch` that holds `held_ns`, returning its `unspent` tokens
    /// to the buckets — unless it has lapsed (then its tokens are lost, and were forgotten).
    fn give_back(&mut self, local: &RateLimit, now: u64, epoch: u64, unspent: [u64; 2], held_ns: [u64; 2]) {
        self.roll(now);
        let age = if epoch == self.epoch {
            0
        } else if epoch + 1 == self.epoch {
            1
        } else {
            return;
        };
        for (d, g) in buckets(local).into_iter().enumerate() {
            self.held[d][age] = self.held[d][age].saturating_sub(held_ns[d]);
            if let Some(g) = g {
                let refund = g.cost_ns(unspent[d]).min(held_ns[d]);
                self.tat[d] = self.tat[d].saturating_sub(refund);
            }
        }
    }

    /// Sets aside a refused request's cost for its retry (see `RateLimit::reserve_batch`):
    /// the new state and when the retry may spend it.
    pub fn reserve(
        mut self,
        limit: &RateLimit,
        scope: Scope,
        now: u64,
        messages: u64,
        bytes: u64,
        horizon_ns: u64,
    ) -> Option<(SharedRate, u64)> {
        let local = self.enforced(limit, scope, now);
        let (narrowed, tat) = self.view(&local, now);
        let (next, ready_at) = narrowed.reserve_batch(tat, now, messages, bytes, horizon_ns)?;
        self.set(next);
        self.admitted[0] = self.admitted[0].saturating_add(messages);
        self.admitted[1] = self.admitted[1].saturating_add(bytes);
        Some((self, ready_at))
    }

    /// Gives back a reservation that will not be spent.
    pub fn refund(mut self, limit: &RateLimit, scope: Scope, now: u64, messages: u64, bytes: u64) -> SharedRate {
        let local = self.enforced(limit, scope, now);
        let (narrowed, tat) = self.view(&local, now);
        self.set(narrowed.refund_batch(tat, messages, bytes));
        // Not admitted after all: the next report must not count it.
        self.admitted[0] = self.admitted[0].saturating_sub(messages);
        self.admitted[1] = self.admitted[1].saturating_sub(bytes);
        self
    }
}

/// One worker's block of a rate limit's tokens.
#[derive(Debug, Default, Clone)]
pub struct RateLease {
    /// Unspent tokens of each bucket (not counted for a bucket the limit does not have).
    units: [u64; 2],
    /// What the shared state records as held for this lease.
    held_ns: [u64; 2],
    epoch: u64,
    /// Units spent since the last renewal, and its time: the worker's demand.
    used: [u64; 2],
    since: u64,
    /// Refusals of a global limit not yet written to the shared state.
    unreported: Unreported,
}

/// A worker's refusals under a limit that its next write to the shared state carries.
#[derive(Debug, Default, Clone, Copy)]
struct Unreported {
    refused: [u64; 2],
    waited_ns: u64,
}

impl Unreported {
    fn with(mut self, messages: u64, bytes: u64, wait_ns: u64) -> Unreported {
        self.refused[0] = self.refused[0].saturating_add(messages);
        self.refused[1] = self.refused[1].saturating_add(bytes);
        self.waited_ns = self.waited_ns.saturating_add(wait_ns);
        self
    }
}

impl RateLease {
    /// Spends `messages` and `bytes` from the lease, if it covers both and has not lapsed. No
    /// shared state is touched.
    pub fn spend(&mut self, limit: &RateLimit, now: u64, messages: u64, bytes: u64) -> bool {
        if now / EPOCH_NS > self.epoch + 1 {
            return false;
        }
        let cost = [messages, bytes];
        let limited = buckets(limit).map(|g| g.is_some());
        if (0..2).any(|d| limited[d] && self.units[d] < cost[d]) {
            return false;
        }
        for d in 0..2 {
            if limited[d] {
                self.units[d] -= cost[d];
            }
            self.used[d] = self.used[d].saturating_add(cost[d]);
        }
        true
    }

    /// Gives `messages` and `bytes` just spent (from the lease or with its renewal) back to the
    /// lease: the message was refused by another of its limits after all. The units stay this
    /// worker's to spend while the lease lasts; the shared bucket keeps them charged, so nothing
    /// beyond the rate is ever admitted.
    pub fn unspend(&mut self, limit: &RateLimit, messages: u64, bytes: u64) {
        let cost = [messages, bytes];
        let limited = buckets(limit).map(|g| g.is_some());
        for d in 0..2 {
            if limited[d] {
                self.units[d] = self.units[d].saturating_add(cost[d]);
            }
            self.used[d] = self.used[d].saturating_sub(cost[d]);
        }
    }

    /// The work of one compare-and-swap on the shared state: gives this lease back and takes
    /// the message's cost and a new block, and counts what the lease admitted. Pure; apply the
    /// grant with [`RateLease::renewed`] once the new state is stored.
    pub fn renew(
        &self,
        limit: &RateLimit,
        scope: Scope,
        shared: [u64; SHARED_RATE_WORDS],
        now: u64,
        messages: u64,
        bytes: u64,
    ) -> Result<([u64; SHARED_RATE_WORDS], Grant), Refusal> {
        let mut s = SharedRate::decode(shared);
        let local = s.enforced(limit, scope, now);
        s.give_back(&local, now, self.epoch, self.units, self.held_ns);
        let units = s.take(&local, now, messages, bytes, self.next_block(&local, now))?;
        for d in 0..2 {
            s.admitted[d] = s.admitted[d].saturating_add(self.used[d]);
        }
        s.add_refusals(&self.unreported);
        let mut held_ns = [0; 2];
        for (d, g) in buckets(&local).into_iter().enumerate() {
            if let Some(g) = g {
                held_ns[d] = g.cost_ns(units[d]);
                s.held[d][0] = s.held[d][0].saturating_add(held_ns[d]);
            }
        }
        let grant = Grant {
            units,
            held_ns,
            epoch: s.epoch,
        };
        Ok((s.encode(), grant))
    }

    /// The renewal was stored: the lease is now the grant, and `messages` and `bytes` were spent.
    pub fn renewed(&mut self, grant: Grant, now: u64, messages: u64, bytes: u64) {
        self.units = grant.units;
        self.held_ns = grant.held_ns;
        self.epoch = grant.epoch;
        self.used = [messages, bytes];
        self.since = now;
        self.unreported = Unreported::default();
    }

    /// The work of recording, at `now`, a refusal of `messages` and `bytes` that will wait
    /// `wait_ns` (delay) or not be sent again (reject): what the next report needs of it, with
    /// the worker's earlier refusals. None if a record was written in the last 100 ms: the
    /// refusal is then counted in the lease ([`RateLease::refusal_kept`]) and written later.
    pub fn refusal(
        &self,
        shared: [u64; SHARED_RATE_WORDS],
        now: u64,
        messages: u64,
        bytes: u64,
        wait_ns: u64,
    ) -> Option<[u64; SHARED_RATE_WORDS]> {
        let mut s = SharedRate::decode(shared);
        if s.saturated_at.saturating_add(SATURATION_RECORD_NS) > now {
            return None;
        }
        s.saturated_at = now;
        s.add_refusals(&self.unreported.with(messages, bytes, wait_ns));
        Some(s.encode())
    }

    /// The refusal [`RateLease::refusal`] recorded was stored, with every earlier one.
    pub fn refusal_stored(&mut self) {
        self.unreported = Unreported::default();
    }

    /// The refusal was not written: the lease keeps it for the next write.
    pub fn refusal_kept(&mut self, messages: u64, bytes: u64, wait_ns: u64) {
        self.unreported = self.unreported.with(messages, bytes, wait_ns);
    }

    /// Whether the lease holds anything the shared state should get back: tokens, or refusals
    /// the next report must count.
    pub fn holds(&self) -> bool {
        let u = &self.unreported;
        self.held_ns != [0, 0] || u.refused != [0, 0] || u.waited_ns != 0
    }

    /// The work of giving the lease back, for a worker done with the limit (a reload changed
    /// it, and no connection of the worker uses it any more).
    pub fn surrender(
        &self,
        limit: &RateLimit,
        scope: Scope,
        shared: [u64; SHARED_RATE_WORDS],
        now: u64,
    ) -> [u64; SHARED_RATE_WORDS] {
        let mut s = SharedRate::decode(shared);
        let local = s.enforced(limit, scope, now);
        s.give_back(&local, now, self.epoch, self.units, self.held_ns);
        for d in 0..2 {
            s.admitted[d] = s.admitted[d].saturating_add(self.used[d]);
        }
        s.add_refusals(&self.unreported);
        s.encode()
    }

    /// The next block: the worker's demand over the last lease, scaled to [`LEASE_NS`], capped
    /// by [`MAX_BLOCK_NS`] of the rate and a [`MAX_SHARE_OF_BURST`] of the burst.
    fn next_block(&self, limit: &RateLimit, now: u64) -> [u64; 2] {
        let elapsed = u128::from(now.saturating_sub(self.since).max(1));
        let mut block = [0; 2];
        for (d, g) in buckets(limit).into_iter().enumerate() {
            let Some(g) = g else { continue };
            let (per_second, _) = g.parameters();
            let by_rate = u128::from(per_second) * u128::from(MAX_BLOCK_NS) / 1_000_000_000;
            let by_burst = u128::from(g.spare(0, now) / MAX_SHARE_OF_BURST);
            let by_demand = u128::from(self.used[d]) * u128::from(LEASE_NS) / elapsed;
            block[d] = u64::try_from(by_demand.min(by_rate).min(by_burst)).unwrap_or(0);
        }
        block
    }
}
