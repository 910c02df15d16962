//! What a tenant's limits would have done to recorded traffic (`weighstation impact`): a trace
//! of messages and bytes per second, replayed through the same limiter the filter enforces with
//! ([`RateLimit`], the GCRA buckets) and the same order of checks (size, then rate; a refused or
//! held message takes nothing from the buckets).
//!
//! A second's messages are spread evenly over it, each of the second's average size. Reject
//! mode refuses what the rate cannot admit at once. Delay mode holds it until the rate admits it
//! — refused if that is later than `maxWait`, or if `maxMessages` are already held — as if
//! each message came on its own connection (the filter holds a connection, and a client that
//! waits sends nothing more meanwhile, so real traffic held this way slows down instead).
//!
//! Clients within a tenant (spec.clients): a client's recorded traffic (the export's client
//! rows, part of its tenant's) passes its client bucket before its tenant's, as in the filter,
//! and is charged to neither unless both admit it; in delay mode it waits for both, and holds at
//! most its own queue share. The rest of the tenant's traffic passes the tenant's bucket only.
//!
//! The read side (limits.consume): what the tenant's consumers received each second is charged
//! to the same [`ConsumeLimit`] the filter charges, which may go into debt; the debt at a
//! second's end is how far behind the proposed limit would have left them (their read lag): a
//! throttled consumer receives the same bytes, later.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

use crate::config::Limits;
use crate::consume::ConsumeLimit;
use crate::limits::RateLimit;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trace {
    pub limits: Limits,
    /// onLimit: reject (else delay).
    #[serde(default)]
    pub reject: bool,
    pub seconds: Vec<Second>,
    /// Client buckets and the traffic recorded of the clients in each (part of `seconds`).
    #[serde(default)]
    pub clients: Vec<ClientTrace>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientTrace {
    /// The bucket's limits (rate and queue.maxMessages are replayed).
    pub limits: Limits,
    /// Ascending, as the tenant's.
    pub seconds: Vec<Second>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Second {
    pub start_ms: u64,
    pub messages: u64,
    pub bytes: u64,
    /// Bytes the tenant's consumers received (the export's consumed column).
    #[serde(default)]
    pub consumed: u64,
}

/// What the limits did to one second's messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub start_ms: u64,
    pub offered: u64,
    /// Admitted at once or after a hold.
    pub admitted: u64,
    pub refused_size: u64,
    pub refused_rate: u64,
    pub refused_queue: u64,
    /// Refused by a client's bucket (its rate, or its share of the queue).
    pub refused_client: u64,
    pub delayed: u64,
    pub max_delay_ms: u64,
    pub consumed: u64,
    /// How far behind the consume limit leaves the consumers at the second's end (its debt).
    pub read_lag_ms: u64,
}

/// A rate bucket and the messages held for it.
struct Bucket {
    rate: RateLimit,
    state: [u64; 2],
    /// When each held message will be admitted: only kept against a queue bound (without one,
    /// an hour of overload would hold millions).
    held: VecDeque<u64>,
    max_held: Option<u64>,
}

impl Bucket {
    fn new(l: &Limits) -> Bucket {
        Bucket {
            rate: l.rate(),
            state: [0; 2],
            held: VecDeque::new(),
            max_held: l.queue_max_messages,
        }
    }

    /// Ok: the state after taking the message at `at`; Err: how long until it could.
    fn check(&self, at: u64, size: u64) -> Result<[u64; 2], u64> {
        self.rate.check(self.state, at, size)
    }

    fn release(&mut self, at: u64) {
        while self.held.front().is_some_and(|&t| t <= at) {
            self.held.pop_front();
        }
    }

    fn full(&self) -> bool {
        self.max_held.is_some_and(|m| self.held.len() as u64 >= m)
    }

    fn hold(&mut self, ready: u64) {
        if self.max_held.is_some() {
            self.held.push_back(ready);
        }
    }
}

/// One message of the second: when it comes, its size, and its client's bucket (None: the
/// tenant's only).
#[derive(Clone, Copy)]
struct Arrival {
    at: u64,
    size: u64,
    client: Option<usize>,
}

/// `messages` of `bytes` spread evenly over the second from `start` (ns).
fn spread(out: &mut Vec<Arrival>, start: u64, messages: u64, bytes: u64, client: Option<usize>) {
    let size = bytes.checked_div(messages).unwrap_or(0);
    let spacing = 1_000_000_000u64.checked_div(messages).unwrap_or(0);
    out.extend((0..messages).map(|i| Arrival {
        at: start + spacing / 2 + i * spacing,
        size,
        client,
    }));
}

/// Replays `trace`; one outcome per second, in the trace's order (seconds must ascend).
pub fn replay(trace: &Trace) -> Vec<Outcome> {
    let max_wait_ns = trace
        .limits
        .queue_max_wait_ms
        .map_or(u64::MAX, |ms| ms.saturating_mul(1_000_000));
    let mut tenant = Bucket::new(&trace.limits);
    let mut clients: Vec<Bucket> = trace.clients.iter().map(|c| Bucket::new(&c.limits)).collect();
    let mut next_second = vec![0usize; trace.clients.len()];
    let consume = ConsumeLimit::bytes_of(&trace.limits);
    let mut read_tat = 0u64;
    let mut arrivals = Vec::new();
    let mut out = Vec::with_capacity(trace.seconds.len());
    for s in &trace.seconds {
        let mut o = Outcome {
            start_ms: s.start_ms,
            offered: s.messages,
            consumed: s.consumed,
            ..Outcome::default()
        };
        let start = s.start_ms.saturating_mul(1_000_000);
        if let (Some(c), true) = (consume, s.consumed > 0) {
            // Received through the second: charged at its middle, the debt read at its end.
            read_tat = c.charge(read_tat, start + 500_000_000, s.consumed);
        }
        if let Some(c) = consume {
            o.read_lag_ms = c.wait_ns(read_tat, start + 1_000_000_000).div_ceil(1_000_000);
        }
        arrivals.clear();
        let (mut rest, mut rest_bytes) = (s.messages, s.bytes);
        for (k, c) in trace.clients.iter().enumerate() {
            let seconds = &c.seconds[next_second[k].min(c.seconds.len())..];
            let skipped = seconds.iter().take_while(|cs| cs.start_ms < s.start_ms).count();
            next_second[k] += skipped;
            if let Some(cs) = c.seconds.get(next_second[k]).filter(|cs| cs.start_ms == s.start_ms) {
                // A client's row is part of its tenant's; never more than it.
                let messages = cs.messages.min(rest);
                let bytes = cs.bytes.min(rest_bytes);
                (rest, rest_bytes) = (rest - messages, rest_bytes - bytes);
                spread(&mut arrivals, start, messages, bytes, Some(k));
                next_second[k] += 1;
            }
        }
        spread(&mut arrivals, start, rest, rest_bytes, None);
        arrivals.sort_by_key(|a| a.at);
        for a in &arrivals {
            decide(trace, max_wait_ns, &mut tenant, &mut clients, *a, &mut o);
        }
        out.push(o);
    }
    out
}

/// One message: the size, then its client's bucket and its tenant's, as the filter decides.
fn decide(trace: &Trace, max_wait_ns: u64, tenant: &mut Bucket, clients: &mut [Bucket], a: Arrival, o: &mut Outcome) {
    let Arrival { at, size, client } = a;
    tenant.release(at);
    let mut client = client.and_then(|k| clients.get_mut(k));
    if let Some(c) = client.as_deref_mut() {
        c.release(at);
    }
    if trace.limits.max_message_bytes.is_some_and(|m| size > m) {
        o.refused_size += 1;
        return;
    }
    let by_client = client.as_deref().map(|c| c.check(at, size));
    let by_tenant = tenant.check(at, size);
    match (by_client, by_tenant) {
        (None | Some(Ok(_)), Ok(next)) => {
            if let (Some(c), Some(Ok(cn))) = (client.as_deref_mut(), by_client) {
                c.state = cn;
            }
            tenant.state = next;
            o.admitted += 1;
            return;
        }
        (Some(Err(_)), _) if trace.reject => {
            o.refused_client += 1;
            return;
        }
        (_, Err(_)) if trace.reject => {
            o.refused_rate += 1;
            return;
        }
        _ => {}
    }
    let client_wait = match by_client {
        Some(Err(w)) => w,
        _ => 0,
    };
    let wait = client_wait.max(by_tenant.err().unwrap_or(0));
    if wait > max_wait_ns || tenant.full() {
        o.refused_queue += 1;
        return;
    }
    if client.as_deref().is_some_and(Bucket::full) {
        o.refused_client += 1;
        return;
    }
    let ready = at + wait;
    let (Ok(next), Ok(cn)) = (
        tenant.check(ready, size),
        client.as_deref().map_or(Ok([0; 2]), |c| c.check(ready, size)),
    ) else {
        // Both admit it at `ready` by construction; should one not, nothing is taken.
        o.refused_queue += 1;
        return;
    };
    tenant.state = next;
    tenant.hold(ready);
    if let Some(c) = client {
        c.state = cn;
        c.hold(ready);
    }
    o.admitted += 1;
    o.delayed += 1;
    o.max_delay_ms = o.max_delay_ms.max(wait.div_ceil(1_000_000));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_second: u64, burst: u64) -> Limits {
        Limits {
            messages_per_second: Some(per_second),
            burst_messages: Some(burst),
            ..Limits::default()
        }
    }

    fn seconds(counts: &[u64]) -> Vec<Second> {
        counts
            .iter()
            .enumerate()
            .map(|(i, &n)| Second {
                start_ms: 1_000_000 + i as u64 * 1000,
                messages: n,
                bytes: n * 100,
                consumed: 0,
            })
            .collect()
    }

    #[test]
    fn reading_past_the_consume_limit_leaves_the_consumers_behind_by_its_debt() {
        let l = Limits {
            consume_bytes_per_second: Some(1000),
            ..Limits::default()
        };
        let mut s = seconds(&[0, 0, 0, 0]);
        for (second, consumed) in s.iter_mut().zip([500, 3000, 1000, 0]) {
            second.consumed = consumed;
        }
        let out = replay(&Trace {
            limits: l,
            reject: true,
            seconds: s,
            clients: Vec::new(),
        });
        let lag: Vec<u64> = out.iter().map(|o| o.read_lag_ms).collect();
        // 500 B within the rate; then 3000 B, beyond the second's 1000 B and the 500 B left in
        // the bucket (1000 B deep): 1.5 s behind; 1000 B more keeps pace; a quiet second
        // catches up a second.
        assert_eq!(lag, vec![0, 1500, 1500, 500]);
        assert_eq!(out[1].consumed, 3000);
    }

    #[test]
    fn reject_admits_the_rate_and_refuses_the_rest() {
        let trace = Trace {
            limits: limits(100, 10),
            reject: true,
            seconds: seconds(&[50, 300, 100]),
            clients: Vec::new(),
        };
        let out = replay(&trace);
        assert_eq!(out[0].admitted, 50, "under the rate: all");
        // 300/s against 100/s: about a third, plus what the burst kept.
        assert!((100..=111).contains(&out[1].admitted), "{:?}", out[1]);
        assert_eq!(out[1].admitted + out[1].refused_rate, 300);
        assert_eq!(out[2].refused_rate, 0, "back at the rate: {:?}", out[2]);
    }

    #[test]
    fn delay_holds_within_max_wait_and_refuses_beyond() {
        let mut l = limits(100, 10);
        l.queue_max_wait_ms = Some(500);
        l.queue_max_messages = Some(1000);
        let out = replay(&Trace {
            limits: l,
            reject: false,
            seconds: seconds(&[150, 150]),
            clients: Vec::new(),
        });
        let total: Outcome = out.iter().fold(Outcome::default(), |a, o| Outcome {
            admitted: a.admitted + o.admitted,
            delayed: a.delayed + o.delayed,
            refused_queue: a.refused_queue + o.refused_queue,
            max_delay_ms: a.max_delay_ms.max(o.max_delay_ms),
            ..a
        });
        assert!(total.delayed > 0 && total.max_delay_ms <= 500, "{total:?}");
        assert!(total.refused_queue > 0, "a backlog past maxWait is refused: {total:?}");
        assert_eq!(total.admitted + total.refused_queue, 300);
        // What it admits over the two seconds is the rate's: 200 + the burst.
        assert!(total.admitted <= 200 + 10 + 50, "{total:?}");
    }

    #[test]
    fn size_is_checked_first_and_takes_no_rate() {
        let mut l = limits(100, 100);
        l.max_message_bytes = Some(50);
        let out = replay(&Trace {
            limits: l,
            reject: true,
            seconds: seconds(&[80]),
            clients: Vec::new(),
        });
        assert_eq!((out[0].refused_size, out[0].admitted), (80, 0));
    }

    #[test]
    fn a_client_is_held_to_its_bucket_and_its_neighbours_are_not() {
        // Tenant 300/s; the runaway client 1000/s against its 100/s; the rest 50/s.
        let runaway = ClientTrace {
            limits: limits(100, 10),
            seconds: seconds(&[1000, 1000]),
        };
        let out = replay(&Trace {
            limits: limits(300, 30),
            reject: true,
            seconds: seconds(&[1050, 1050]),
            clients: vec![runaway],
        });
        let second = out[1];
        assert_eq!(
            second.refused_rate, 0,
            "the tenant's bucket refuses nothing: {second:?}"
        );
        assert!(
            (100..=111).contains(&(second.admitted - 50)),
            "the runaway at its 100/s: {second:?}"
        );
        assert_eq!(second.admitted + second.refused_client, 1050);
    }

    #[test]
    fn in_delay_a_client_holds_only_its_share_of_the_queue() {
        let mut tenant = limits(1000, 10);
        tenant.queue_max_wait_ms = Some(2000);
        tenant.queue_max_messages = Some(1000);
        let mut client = limits(100, 10);
        client.queue_max_messages = Some(5);
        let out = replay(&Trace {
            limits: tenant,
            reject: false,
            seconds: seconds(&[500]),
            clients: vec![ClientTrace {
                limits: client,
                seconds: seconds(&[400]),
            }],
        });
        let o = out[0];
        // The other 100 pass; the client gets its rate's share plus five held at a time.
        assert_eq!(o.refused_queue, 0, "{o:?}");
        assert!(o.refused_client > 250, "beyond its queue share it is refused: {o:?}");
        assert!(o.admitted >= 100 && o.admitted <= 100 + 100 + 10 + 5, "{o:?}");
        assert_eq!(o.admitted + o.refused_client, 500);
    }

    #[test]
    fn no_rate_admits_everything() {
        let out = replay(&Trace {
            limits: Limits::default(),
            reject: true,
            seconds: seconds(&[1_000_000]),
            clients: Vec::new(),
        });
        assert_eq!(out[0].admitted, 1_000_000);
    }
}
