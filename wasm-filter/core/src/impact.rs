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
//! The read side (limits.consume): what the tenant's consumers received each second is charged
//! to the same [`ConsumeLimit`] the filter charges, which may go into debt; the debt at a
//! second's end is how far behind the proposed limit would have left them (their read lag): a
//! throttled consumer receives the same bytes, later.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

use crate::config::Limits;
use crate::consume::ConsumeLimit;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trace {
    pub limits: Limits,
    /// onLimit: reject (else delay).
    #[serde(default)]
    pub reject: bool,
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
    pub delayed: u64,
    pub max_delay_ms: u64,
    pub consumed: u64,
    /// How far behind the consume limit leaves the consumers at the second's end (its debt).
    pub read_lag_ms: u64,
}

/// Replays `trace`; one outcome per second, in the trace's order (seconds must ascend).
pub fn replay(trace: &Trace) -> Vec<Outcome> {
    let rate = trace.limits.rate();
    let max_wait_ns = trace
        .limits
        .queue_max_wait_ms
        .map_or(u64::MAX, |ms| ms.saturating_mul(1_000_000));
    let max_held = trace.limits.queue_max_messages.unwrap_or(u64::MAX);
    let mut state = [0u64; 2];
    // When each held message will be admitted: only counted against a queue bound (without
    // one, an hour of overload would hold millions).
    let bounded = trace.limits.queue_max_messages.is_some();
    let mut held: VecDeque<u64> = VecDeque::new();
    let consume = trace
        .limits
        .consume_bytes_per_second
        .and_then(|rate| ConsumeLimit::new(rate, trace.limits.consume_burst_bytes.unwrap_or(rate)));
    let mut read_tat = 0u64;
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
        let size = s.bytes.checked_div(s.messages).unwrap_or(0);
        let spacing = 1_000_000_000u64.checked_div(s.messages).unwrap_or(0);
        for i in 0..s.messages {
            let at = start + spacing / 2 + i * spacing;
            while held.front().is_some_and(|&t| t <= at) {
                held.pop_front();
            }
            if trace.limits.max_message_bytes.is_some_and(|m| size > m) {
                o.refused_size += 1;
                continue;
            }
            let wait = match rate.check(state, at, size) {
                Ok(next) => {
                    state = next;
                    o.admitted += 1;
                    continue;
                }
                Err(wait) => wait,
            };
            if trace.reject {
                o.refused_rate += 1;
                continue;
            }
            if wait > max_wait_ns || held.len() as u64 >= max_held {
                o.refused_queue += 1;
                continue;
            }
            let ready = at + wait;
            match rate.check(state, ready, size) {
                Ok(next) => state = next,
                // The rate admits it at `ready` by construction; should it not, nothing is taken.
                Err(_) => {
                    o.refused_queue += 1;
                    continue;
                }
            }
            if bounded {
                held.push_back(ready);
            }
            o.admitted += 1;
            o.delayed += 1;
            o.max_delay_ms = o.max_delay_ms.max(wait.div_ceil(1_000_000));
        }
        out.push(o);
    }
    out
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
        });
        assert_eq!((out[0].refused_size, out[0].admitted), (80, 0));
    }

    #[test]
    fn no_rate_admits_everything() {
        let out = replay(&Trace {
            limits: Limits::default(),
            reject: true,
            seconds: seconds(&[1_000_000]),
        });
        assert_eq!(out[0].admitted, 1_000_000);
    }
}
