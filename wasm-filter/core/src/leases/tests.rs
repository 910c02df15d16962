//! Leases against their promises, with several workers interleaved at random: rate tokens
//! never exceed burst + rate × T over any window, the rate is still delivered when workers
//! compete for it, and in-flight slots are never over the limit and all come back.

use super::{RateLease, Refusal, Scope, SharedRate, SlotLease, Usage, EPOCH_NS, PPM, SHARED_RATE_WORDS};
use crate::limits::RateLimit;
use proptest::collection::vec;
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000_000_000;
const SECOND: u64 = 1_000_000_000;

#[derive(Debug, Clone)]
enum Step {
    /// A worker is asked to admit a message of `bytes` after `gap_ns`.
    Message { worker: usize, gap_ns: u64, bytes: u64 },
    /// The same, but another of the message's limits refuses it once this one admitted it: the
    /// lease gets the cost back (RateLease::unspend), and the message is not sent.
    Withdrawn { worker: usize, gap_ns: u64, bytes: u64 },
    /// A worker gives its lease back (a reload left it unused).
    Surrender { worker: usize },
    /// A worker's VM is replaced: its lease is lost without a word.
    Lost { worker: usize },
}

/// Messages at a pace, in bursts at one instant, and now and then after a pause long enough for
/// the bucket to fill while workers still hold leases — when a careless lease would overshoot.
fn step(workers: usize) -> impl Strategy<Value = Step> {
    let gap = prop_oneof![20 => 0u64..1_000, 10 => Just(0), 1 => 0u64..100_000];
    prop_oneof![
        40 => (0..workers, gap.clone(), 1u64..400).prop_map(|(worker, gap_ns, bytes)| Step::Message { worker, gap_ns, bytes }),
        8 => (0..workers, gap, 1u64..400).prop_map(|(worker, gap_ns, bytes)| Step::Withdrawn { worker, gap_ns, bytes }),
        1 => (0..workers).prop_map(|worker| Step::Surrender { worker }),
        1 => (0..workers).prop_map(|worker| Step::Lost { worker }),
    ]
}

/// Admission times with their bytes, as the glue would decide them.
fn run(limit: &RateLimit, workers: usize, steps: &[Step]) -> Vec<(u64, u64)> {
    Replica::new(Scope::PerGateway, [0; SHARED_RATE_WORDS], workers).run(limit, steps)
}

/// One Envoy process: its shared state of a limit and its workers' leases.
struct Replica {
    scope: Scope,
    shared: [u64; SHARED_RATE_WORDS],
    leases: Vec<RateLease>,
    now: u64,
    /// Messages refused so far.
    refused: u64,
}

impl Replica {
    fn new(scope: Scope, shared: [u64; SHARED_RATE_WORDS], workers: usize) -> Replica {
        Replica {
            scope,
            shared,
            leases: vec![RateLease::default(); workers],
            now: T0,
            refused: 0,
        }
    }

    /// Gives every lease back, as a reload that drops the limit does.
    fn surrender_all(&mut self, limit: &RateLimit) {
        for lease in &mut self.leases {
            self.shared = lease.surrender(limit, self.scope, self.shared, self.now);
            *lease = RateLease::default();
        }
    }

    fn run(&mut self, limit: &RateLimit, steps: &[Step]) -> Vec<(u64, u64)> {
        let Replica {
            scope,
            shared,
            leases,
            now,
            refused,
        } = self;
        let scope = *scope;
        let mut admitted = Vec::new();
        for s in steps {
            match *s {
                Step::Message { worker, gap_ns, bytes } | Step::Withdrawn { worker, gap_ns, bytes } => {
                    *now += gap_ns;
                    let now = *now;
                    let withdrawn = matches!(s, Step::Withdrawn { .. });
                    let lease = &mut leases[worker];
                    let mut admit = |lease: &mut RateLease| {
                        if withdrawn {
                            lease.unspend(limit, 1, bytes);
                        } else {
                            admitted.push((now, bytes));
                        }
                    };
                    if lease.spend(limit, now, 1, bytes) {
                        admit(lease);
                    } else {
                        match lease.renew(limit, scope, *shared, now, 1, bytes) {
                            Ok((next, grant)) => {
                                *shared = next;
                                lease.renewed(grant, now, 1, bytes);
                                admit(lease);
                            }
                            Err(refusal) => {
                                *refused += 1;
                                match lease.refusal(*shared, now, 1, bytes, refusal.wait_ns) {
                                    Some(next) => {
                                        *shared = next;
                                        lease.refusal_stored();
                                    }
                                    None => lease.refusal_kept(1, bytes, refusal.wait_ns),
                                }
                            }
                        }
                    }
                }
                Step::Surrender { worker } => {
                    if leases[worker].holds() {
                        *shared = leases[worker].surrender(limit, scope, *shared, *now);
                        leases[worker] = RateLease::default();
                    }
                }
                Step::Lost { worker } => leases[worker] = RateLease::default(),
            }
        }
        admitted
    }
}

/// The most admitted within any window of `window_ns`: (messages, bytes).
fn busiest_window(admitted: &[(u64, u64)], window_ns: u64) -> (u64, u64) {
    let (mut most, mut j, mut in_window) = ((0, 0), 0, (0, 0));
    for &(t, b) in admitted {
        in_window = (in_window.0 + 1, in_window.1 + b);
        while admitted[j].0 + window_ns < t {
            in_window = (in_window.0 - 1, in_window.1 - admitted[j].1);
            j += 1;
        }
        most = (most.0.max(in_window.0), most.1.max(in_window.1));
    }
    most
}

fn limit(mps: u64, burst: u64, bps: u64, burst_bytes: u64) -> RateLimit {
    RateLimit::new(Some((mps, burst)), Some((bps, burst_bytes)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn no_window_admits_more_than_burst_plus_rate(
        workers in 1usize..5,
        steps in vec(step(4), 2_000..12_000),
        mps in 200u64..20_000,
        burst in 1u64..400,
        gap_scale_ns in 1u64..1_500,
    ) {
        // Gaps are drawn in units scaled per case, so that some cases offer less than the
        // rate (workers get blocks to hold) and others more.
        let steps: Vec<Step> = steps.into_iter().map(|s| match s {
            Step::Message { worker, gap_ns, bytes } => Step::Message { worker: worker % workers, gap_ns: gap_ns * gap_scale_ns, bytes },
            Step::Withdrawn { worker, gap_ns, bytes } => Step::Withdrawn { worker: worker % workers, gap_ns: gap_ns * gap_scale_ns, bytes },
            Step::Surrender { worker } => Step::Surrender { worker: worker % workers },
            Step::Lost { worker } => Step::Lost { worker: worker % workers },
        }).collect();
        let l = limit(mps, burst, mps * 100, burst * 400);
        let admitted = run(&l, workers, &steps);
        for window_ns in [SECOND / 10, SECOND / 2, SECOND] {
            let (m, b) = busiest_window(&admitted, window_ns);
            let most = |rate: u64, burst: u64| burst + rate * window_ns / SECOND;
            prop_assert!(m <= most(mps, burst), "{m} messages in {window_ns} ns: over {}", most(mps, burst));
            prop_assert!(b <= most(mps * 100, burst * 400), "{b} bytes in {window_ns} ns");
        }
    }
}

/// Two workers offered 2x and 10x the rate between them, their share of the traffic shifting:
/// the tenant still gets its rate (within 2%), as with one bucket and no leases.
#[test]
fn competing_workers_get_the_whole_rate() {
    for factor in [2u64, 10] {
        for split in [1u64, 3, 9] {
            let mps = 5_000;
            let l = limit(mps, 500, u64::MAX / 4, u64::MAX / 4);
            let gap = SECOND / (mps * factor);
            let seconds = 4;
            let steps: Vec<Step> = (0..mps * factor * seconds)
                .map(|i| Step::Message {
                    worker: usize::from(i % (split + 1) != 0),
                    gap_ns: gap,
                    bytes: 100,
                })
                .collect();
            let admitted = run(&l, 2, &steps);
            let expected = mps * seconds + 500;
            let got = admitted.len() as u64;
            assert!(
                got.abs_diff(expected) * 50 <= expected,
                "{factor}x split 1:{split}: {got} admitted, {expected} expected"
            );
        }
    }
}

#[test]
fn a_lost_lease_lapses_within_two_epochs() {
    let l = limit(1_000, 100, 1 << 40, 1 << 40);
    let mut shared = [0u64; SHARED_RATE_WORDS];
    let mut busy = RateLease::default();
    // Demand builds a block, then the worker vanishes holding it.
    let mut now = T0;
    for _ in 0..20 {
        now += 2_000_000;
        if !busy.spend(&l, now, 1, 1) {
            let (next, grant) = busy
                .renew(&l, Scope::PerGateway, shared, now, 1, 1)
                .unwrap_or_else(|r| panic!("refused {r:?}"));
            shared = next;
            busy.renewed(grant, now, 1, 1);
        }
    }
    assert!(busy.holds(), "the busy worker holds a block");
    let held = SharedRate::decode(shared);
    let later = now + 2 * EPOCH_NS + SECOND;
    let fresh = RateLease::default();
    let after_lapse = fresh.renew(&l, Scope::PerGateway, held.encode(), later, 100, 1);
    assert!(
        after_lapse.is_ok(),
        "a full burst is available again once the lost lease lapsed: {after_lapse:?}"
    );
}

#[test]
fn a_withdrawn_message_leaves_its_cost_to_the_next() {
    let l = limit(10, 1, 1 << 40, 1 << 40);
    let mut lease = RateLease::default();
    let (shared, grant) = lease
        .renew(&l, Scope::PerGateway, [0; SHARED_RATE_WORDS], T0, 1, 1)
        .unwrap_or_else(|r| panic!("refused {r:?}"));
    lease.renewed(grant, T0, 1, 1);
    assert!(
        lease.renew(&l, Scope::PerGateway, shared, T0, 1, 1).is_err(),
        "the one-message burst is spent"
    );
    lease.unspend(&l, 1, 1);
    assert!(lease.spend(&l, T0, 1, 1), "given back, the next message spends it");
    assert!(!lease.spend(&l, T0, 1, 1), "once");
}

#[test]
fn giving_a_lease_back_returns_its_unspent_tokens() {
    let l = limit(1_000, 100, 1 << 40, 1 << 40);
    let mut shared = [0u64; SHARED_RATE_WORDS];
    let mut a = RateLease::default();
    let mut now = T0;
    // Two renewals a few ms apart: the second sizes a block from the demand in between.
    for _ in 0..2 {
        let (next, grant) = a
            .renew(&l, Scope::PerGateway, shared, now, 1, 1)
            .unwrap_or_else(|r| panic!("refused {r:?}"));
        shared = next;
        a.renewed(grant, now, 1, 1);
        now += 10_000;
    }
    assert!(a.holds());
    let b = RateLease::default();
    assert!(
        b.renew(&l, Scope::PerGateway, shared, now, 98, 1).is_err(),
        "while a holds its block, the burst left is smaller"
    );
    shared = a.surrender(&l, Scope::PerGateway, shared, now);
    assert!(
        b.renew(&l, Scope::PerGateway, shared, now, 98, 1).is_ok(),
        "given back, the block is the others' again"
    );
}

#[derive(Debug, Clone)]
enum SlotStep {
    Request { worker: usize },
    Reply { worker: usize },
    Surrender { worker: usize },
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn in_flight_slots_never_exceed_the_limit_and_all_come_back(
        limit in 1u64..5_000,
        steps in vec(prop_oneof![
            6 => (0usize..3).prop_map(|worker| SlotStep::Request { worker }),
            5 => (0usize..3).prop_map(|worker| SlotStep::Reply { worker }),
            1 => (0usize..3).prop_map(|worker| SlotStep::Surrender { worker }),
        ], 1..6_000),
    ) {
        let mut taken = 0u64;
        let mut leases = vec![SlotLease::default(); 3];
        let mut in_use = [0u64; 3];
        for s in steps {
            match s {
                SlotStep::Request { worker } => {
                    let granted = if leases[worker].take() {
                        true
                    } else if let Some((next, slots)) = SlotLease::take_shared(limit, taken) {
                        taken = next;
                        leases[worker].granted(slots);
                        true
                    } else {
                        false
                    };
                    if granted {
                        in_use[worker] += 1;
                    } else {
                        prop_assert_eq!(taken, limit, "refused only when every slot is taken");
                    }
                }
                SlotStep::Reply { worker } if in_use[worker] > 0 => {
                    in_use[worker] -= 1;
                    taken -= leases[worker].put_back(limit);
                }
                SlotStep::Reply { .. } => {}
                SlotStep::Surrender { worker } => taken -= leases[worker].surrender(),
            }
            prop_assert!(taken <= limit);
            prop_assert!(in_use.iter().sum::<u64>() <= taken);
            let idle = taken - in_use.iter().sum::<u64>();
            prop_assert!(idle <= 3 * (2 * (limit / 512) + 1), "{} idle of {}", idle, limit);
        }
        for (worker, lease) in leases.iter_mut().enumerate() {
            for _ in 0..in_use[worker] {
                taken -= lease.put_back(limit);
            }
            taken -= lease.surrender();
        }
        prop_assert_eq!(taken, 0, "every slot came back");
    }
}

/// The moment leases could overshoot: a worker holds a block, the bucket refills meanwhile,
/// and then both the bucket and the block are spent at once.
#[test]
fn a_held_block_and_a_refilled_bucket_never_add_up_to_more_than_the_burst() {
    let (mps, burst) = (10_000, 200);
    let l = limit(mps, burst, 1 << 40, 1 << 40);
    let mut steps: Vec<Step> = (0..100)
        .map(|_| Step::Message {
            worker: 0,
            gap_ns: 200_000,
            bytes: 1,
        })
        .collect();
    steps.push(Step::Message {
        worker: 1,
        gap_ns: 30_000_000,
        bytes: 1,
    });
    for worker in [0, 1] {
        steps.extend((0..2 * burst).map(|_| Step::Message {
            worker,
            gap_ns: 0,
            bytes: 1,
        }));
    }
    let admitted = run(&l, 2, &steps);
    let after_pause = admitted
        .iter()
        .filter(|(t, _)| *t == admitted[admitted.len() - 1].0)
        .count() as u64;
    // The shared state knows how much of a bucket a block holds, not how much of the block was
    // spent: the burst right after a pause can be short by the spent part (at most an 8th).
    assert!(
        (burst - burst / 8..=burst).contains(&after_pause),
        "{after_pause} admitted at once: the burst ({burst}), not the burst and worker 0's block"
    );
}

/// Messages offered by `workers` workers in turn, `per_second` of them for `seconds`.
fn offered(workers: usize, per_second: u64, seconds: u64) -> Vec<Step> {
    (0..per_second * seconds)
        .map(|i| Step::Message {
            worker: (i % workers as u64) as usize,
            gap_ns: SECOND / per_second,
            bytes: 100,
        })
        .collect()
}

/// A replica of a global limit enforces the share the quota service gave it while the share
/// holds, and limit ÷ live replicas once it lapses — both with the burst cut in proportion.
#[test]
fn a_replica_enforces_its_share_then_an_even_part() {
    let mps = 10_000;
    let l = limit(mps, 1_000, u64::MAX / 4, u64::MAX / 4);
    let global = Scope::Global { replicas: 4 };
    let share = SharedRate::with_share([0; SHARED_RATE_WORDS], &l, global, PPM * 7 / 10, T0 + 2 * SECOND, T0);
    let mut replica = Replica::new(global, share, 2);
    let admitted = replica.run(&l, &offered(2, mps * 10, 4));
    let before = admitted.iter().filter(|(t, _)| *t < T0 + 2 * SECOND).count() as u64;
    let after = admitted.len() as u64 - before;
    let within = |got: u64, want: u64| got.abs_diff(want) * 50 <= want;
    assert!(within(before, 7_000 * 2 + 700), "{before} admitted on a 0.7 share");
    assert!(within(after, 2_500 * 2), "{after} admitted on the fallback of 1/4");
}

/// A per-gateway limit ignores any share: the whole limit is this process's.
#[test]
fn a_per_gateway_limit_is_whole() {
    let l = limit(10_000, 1_000, u64::MAX / 4, u64::MAX / 4);
    let share = SharedRate::with_share([0; SHARED_RATE_WORDS], &l, Scope::PerGateway, PPM / 10, u64::MAX, T0);
    let admitted = Replica::new(Scope::PerGateway, share, 2)
        .run(&l, &offered(2, 100_000, 2))
        .len() as u64;
    assert!(admitted.abs_diff(21_000) * 50 <= 21_000, "{admitted}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// What the quota service is told a replica admitted and refused is what it admitted and
    /// refused: every message counted once, whether its lease was renewed or given back, and
    /// every refusal, whether it was written at once or kept in the lease for the next write.
    #[test]
    fn usage_counts_every_admitted_message_once(
        steps in vec(step(3), 500..4_000),
        mps in 200u64..20_000,
        reports in 1usize..5,
    ) {
        let steps: Vec<Step> = steps.into_iter().filter(|s| !matches!(s, Step::Lost { .. })).collect();
        let l = limit(mps, mps / 10 + 1, u64::MAX / 4, u64::MAX / 4);
        let mut replica = Replica::new(Scope::Global { replicas: 2 }, [0; SHARED_RATE_WORDS], 3);
        let mut admitted = 0u64;
        let mut reported = Usage::default();
        let mut add = |usage: Usage| {
            reported.admitted[0] += usage.admitted[0];
            reported.refused[0] += usage.refused[0];
        };
        for part in steps.chunks(steps.len() / reports + 1) {
            admitted += replica.run(&l, part).len() as u64;
            let (next, usage) = SharedRate::take_usage(replica.shared, 0);
            replica.shared = next;
            add(usage);
        }
        replica.surrender_all(&l);
        add(SharedRate::take_usage(replica.shared, 0).1);
        prop_assert_eq!(reported.admitted[0], admitted);
        prop_assert_eq!(reported.refused[0], replica.refused);
    }
}

/// A replica held back since the last report says so; one that was not, does not.
#[test]
fn usage_says_whether_the_replica_was_held_back() {
    let l = limit(1_000, 100, u64::MAX / 4, u64::MAX / 4);
    let mut replica = Replica::new(Scope::Global { replicas: 1 }, [0; SHARED_RATE_WORDS], 1);
    replica.run(&l, &offered(1, 500, 1));
    let (next, calm) = SharedRate::take_usage(replica.shared, T0);
    assert!(!calm.saturated && calm.admitted[0] > 400, "{calm:?}");
    replica.shared = next;
    let since = replica.now;
    replica.run(&l, &offered(1, 5_000, 1));
    let (_, busy) = SharedRate::take_usage(replica.shared, since);
    assert!(busy.saturated, "{busy:?}");
}

/// A reservation set aside for a retry counts as admitted until it is refunded.
#[test]
fn a_refunded_reservation_is_not_reported_as_admitted() {
    let l = limit(1_000, 100, u64::MAX / 4, u64::MAX / 4);
    let scope = Scope::Global { replicas: 1 };
    let Some((reserved, _)) = SharedRate::decode([0; SHARED_RATE_WORDS]).reserve(&l, scope, T0, 10, 500, SECOND) else {
        panic!("nothing reserved");
    };
    assert_eq!(SharedRate::take_usage(reserved.encode(), 0).1.admitted, [10, 500]);
    let refunded = reserved.refund(&l, scope, T0, 10, 500);
    assert_eq!(SharedRate::take_usage(refunded.encode(), 0).1.admitted, [0, 0]);
}

/// A client pool's slot may change hands once its bucket is full again (crate::clients::pool):
/// not while a worker holds a block of it, nor before the tokens spent have come back.
#[test]
fn a_bucket_is_refilled_once_its_spending_is_paid_back_and_no_lease_holds_it() {
    let l = RateLimit::new(Some((1_000, 1_000)), None);
    let shared = [0u64; SHARED_RATE_WORDS];
    assert!(SharedRate::refilled(shared, T0), "a bucket never used is full");
    let mut worker = RateLease::default();
    let mut now = T0;
    let mut state = shared;
    for _ in 0..50 {
        now += 1_000_000;
        if !worker.spend(&l, now, 5, 0) {
            let (next, grant) = worker.renew(&l, Scope::PerGateway, state, now, 5, 0).unwrap();
            state = next;
            worker.renewed(grant, now, 5, 0);
        }
    }
    assert!(worker.holds(), "the worker holds a block");
    assert!(!SharedRate::refilled(state, now), "spent from and held");
    state = worker.surrender(&l, Scope::PerGateway, state, now);
    assert!(
        !SharedRate::refilled(state, now),
        "given back, but 250 of its tokens were spent"
    );
    assert!(
        SharedRate::refilled(state, now + SECOND / 4 + 1),
        "a quarter second of the rate later"
    );
}

/// A debt taken on at a share of next to nothing (a replica given none, whose client then sent
/// 1 KiB: 15 s at 1 ppm of 64 MiB/s) is owed in units when the share lapses to the even part,
/// as when a new share comes: the next message waits for those units at the even part's rate.
#[test]
fn a_debt_outlives_a_lapsed_share_as_units() {
    let l = limit(300, 30, 64 << 20, 64 << 20);
    let global = Scope::Global { replicas: 3 };
    let nothing = SharedRate::with_share([0; SHARED_RATE_WORDS], &l, global, 1, T0 + SECOND / 2, T0);
    let first = RateLease::default().renew(&l, global, nothing, T0, 1, 1024);
    let Ok((in_debt, _)) = first else {
        panic!("a message larger than the bucket is admitted once it is full: {first:?}");
    };
    let wait = |r: Result<_, Refusal>| r.map_or_else(|r| r.wait_ns, |_| 0);
    let next = RateLease::default().renew(&l, global, in_debt, T0 + SECOND, 1, 1024);
    assert!(wait(next) < SECOND / 100, "a second after, on the even part: {next:?}");
    let renewed = SharedRate::with_share(in_debt, &l, global, PPM / 2, T0 + 3 * SECOND, T0 + SECOND);
    let next = RateLease::default().renew(&l, global, renewed, T0 + SECOND, 1, 1024);
    assert!(wait(next) < SECOND / 100, "or on a new share: {next:?}");
}
