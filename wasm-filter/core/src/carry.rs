//! What becomes of Envoy's buffer of a client connection while a message is held, shared by the
//! protocols. While anything is held the glue never lets Envoy forward on its own: what was
//! admitted ahead of the held message is forwarded by rewriting Envoy's buffer to it and
//! resuming, and the bytes behind it are carried here, ahead of what Envoy reads next — up to
//! the protocol's LIMIT, beyond which they stay in Envoy's buffer, which fills up to
//! per_connection_buffer_limit_bytes and then pushes back on the client through TCP.
//!
//! Forwarding always empties Envoy's buffer (it forwards all of it), and Envoy then reads up to
//! its limit again. So under sustained overload, once LIMIT is reached, the admitted prefix goes
//! out in steps of about one Envoy buffer: that buffer (a listener's
//! per_connection_buffer_limit_bytes, 32 KiB by default) sets how bursty a held connection's
//! forwarding is, and LIMIT how much the filter itself keeps per connection.

use crate::scan::Outcome;
use crate::source::{Source, Whole};

/// What to do with Envoy's buffer after a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Forward the buffer (replaced by this first, if given) and leave the paused state.
    Forward(Option<Vec<u8>>),
    /// Stay paused, with Envoy's buffer replaced by `buffer` if given; `resume` forwards it.
    Hold { buffer: Option<Vec<u8>>, resume: bool },
}

/// Held bytes that precede Envoy's buffer, at most LIMIT of them.
#[derive(Debug, Default)]
pub struct Carry<const LIMIT: usize>(Vec<u8>);

impl<const LIMIT: usize> Carry<LIMIT> {
    /// Runs `scan` over the carried bytes followed by Envoy's. Also returns how many bytes of a
    /// held buffer the plan forwards: the scanner must be told, as its next buffer starts there.
    /// Envoy's bytes are read whole only when something is carried, edited or held.
    pub fn scan<E>(
        &mut self,
        envoy: &mut dyn Source,
        scan: impl FnOnce(&mut dyn Source) -> Result<Outcome, E>,
    ) -> Result<(Plan, usize), E> {
        if self.0.is_empty() {
            let outcome = scan(envoy)?;
            return Ok(self.plan(outcome, envoy, false));
        }
        let input = [std::mem::take(&mut self.0).as_slice(), envoy.all()].concat();
        let mut joined = Whole(&input);
        let outcome = scan(&mut joined)?;
        Ok(self.plan(outcome, &mut joined, true))
    }

    fn plan(&mut self, outcome: Outcome, input: &mut dyn Source, carried: bool) -> (Plan, usize) {
        let changed = outcome.replace.is_some() || carried;
        if !outcome.hold {
            let forward = changed.then(|| outcome.replace.unwrap_or_else(|| input.all().to_vec()));
            return (Plan::Forward(forward), 0);
        }
        let output = match outcome.replace {
            Some(replaced) => replaced,
            None => input.all().to_vec(),
        };
        let (ahead, behind) = output.split_at(outcome.decided.min(output.len()));
        if behind.len() > LIMIT {
            return (
                Plan::Hold {
                    buffer: changed.then(|| output.clone()),
                    resume: false,
                },
                0,
            );
        }
        self.0 = behind.to_vec();
        (
            Plan::Hold {
                buffer: Some(ahead.to_vec()),
                resume: !ahead.is_empty(),
            },
            ahead.len(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Ranges;
    use proptest::prelude::*;
    use std::convert::Infallible;

    fn forward(replace: Option<&[u8]>) -> Outcome {
        Outcome {
            hold: false,
            replace: replace.map(<[u8]>::to_vec),
            decided: 0,
        }
    }

    fn hold(decided: usize) -> Outcome {
        Outcome {
            hold: true,
            replace: None,
            decided,
        }
    }

    /// Carries the tests' held message, `PUB a 0\r\n`, and not a byte more.
    type OneMessage = Carry<9>;

    /// Scans with a scanner that answers `outcome` and records what it was shown.
    fn scan<const L: usize>(carry: &mut Carry<L>, envoy: &[u8], outcome: Outcome) -> (Plan, usize, Vec<u8>) {
        let mut seen = Vec::new();
        let Ok((plan, forwarded)) = carry.scan(&mut Ranges::new(envoy), |buf| {
            seen = buf.all().to_vec();
            Ok::<_, Infallible>(outcome)
        });
        (plan, forwarded, seen)
    }

    #[test]
    fn an_unchanged_buffer_is_forwarded_as_it_is() {
        let mut carry = OneMessage::default();
        assert_eq!(
            scan(&mut carry, b"PING\r\n", forward(None)),
            (Plan::Forward(None), 0, b"PING\r\n".to_vec())
        );
    }

    #[test]
    fn a_replace_is_forwarded() {
        let mut carry = OneMessage::default();
        let (plan, forwarded, _) = scan(&mut carry, b"PUB a 1\r\n!\r\n", forward(Some(b"PING\r\n")));
        assert_eq!((plan, forwarded), (Plan::Forward(Some(b"PING\r\n".to_vec())), 0));
    }

    #[test]
    fn a_hold_within_the_limit_carries_the_tail_and_forwards_the_decided_prefix() {
        let mut carry = OneMessage::default();
        let (plan, forwarded, _) = scan(&mut carry, b"PING\r\nPUB a 0\r\n", hold(6));
        assert_eq!(
            plan,
            Plan::Hold {
                buffer: Some(b"PING\r\n".to_vec()),
                resume: true
            }
        );
        assert_eq!(forwarded, 6, "the scanner's next buffer starts at the held message");
        assert_eq!(carry.0, b"PUB a 0\r\n");
    }

    #[test]
    fn a_hold_with_nothing_decided_empties_envoys_buffer_without_resuming() {
        let mut carry = OneMessage::default();
        let (plan, forwarded, _) = scan(&mut carry, b"PUB a 0\r\n", hold(0));
        assert_eq!(
            (plan, forwarded),
            (
                Plan::Hold {
                    buffer: Some(Vec::new()),
                    resume: false
                },
                0
            )
        );
        assert_eq!(carry.0, b"PUB a 0\r\n");
    }

    #[test]
    fn carried_bytes_are_scanned_ahead_of_envoys() {
        let mut carry = OneMessage::default();
        scan(&mut carry, b"PUB a 0\r\n", hold(0));
        let (plan, forwarded, seen) = scan(&mut carry, b"PING\r\n", forward(None));
        assert_eq!(seen, b"PUB a 0\r\nPING\r\n");
        assert_eq!(
            (plan, forwarded),
            (Plan::Forward(Some(b"PUB a 0\r\nPING\r\n".to_vec())), 0),
            "Envoy's buffer is rewritten to include the carried bytes"
        );
        assert!(carry.0.is_empty());
    }

    #[test]
    fn a_tail_over_the_limit_stays_in_envoys_buffer() {
        let mut carry = Carry::<8>::default();
        let (plan, forwarded, _) = scan(&mut carry, b"PING\r\nPUB a 0\r\n", hold(6));
        assert_eq!(
            (plan, forwarded),
            (
                Plan::Hold {
                    buffer: None,
                    resume: false
                },
                0
            )
        );
        assert!(carry.0.is_empty(), "nothing carried: Envoy keeps it all");
    }

    #[test]
    fn a_tail_over_the_limit_behind_carried_bytes_goes_back_to_envoys_buffer() {
        let mut carry = OneMessage::default();
        scan(&mut carry, b"PUB a 0\r\n", hold(0));
        let (plan, forwarded, _) = scan(&mut carry, b"PING\r\n", hold(0));
        assert_eq!(
            (plan, forwarded),
            (
                Plan::Hold {
                    buffer: Some(b"PUB a 0\r\nPING\r\n".to_vec()),
                    resume: false
                },
                0
            )
        );
        assert!(carry.0.is_empty());
    }

    /// Envoy's side of a paused connection: the bytes it holds for the filter, and what it
    /// passed on.
    #[derive(Default)]
    struct Envoy {
        buffer: Vec<u8>,
        forwarded: Vec<u8>,
    }

    impl Envoy {
        /// Returns how many bytes it passed on.
        fn apply(&mut self, plan: Plan) -> usize {
            let (buffer, forward) = match plan {
                Plan::Forward(buffer) => (buffer, true),
                Plan::Hold { buffer, resume } => (buffer, resume),
            };
            if let Some(b) = buffer {
                self.buffer = b;
            }
            if !forward {
                return 0;
            }
            let n = self.buffer.len();
            self.forwarded.append(&mut self.buffer);
            n
        }
    }

    proptest! {
        /// A scanner that forwards everything, holding at any point of any read: whatever the
        /// reads and wherever the holds fall, what goes out is the input, once, in order, and a
        /// hold reports what it forwards.
        #[test]
        fn nothing_is_lost_or_duplicated(
            input in proptest::collection::vec(any::<u8>(), 0..256),
            reads in proptest::collection::vec((1usize..40, any::<Option<u8>>()), 1..32),
        ) {
            // Small, so that long tails stay in Envoy's buffer too.
            let mut carry = Carry::<16>::default();
            let mut envoy = Envoy::default();
            let mut rest = input.as_slice();
            for (size, hold_at) in reads {
                let (read, after) = rest.split_at(size.min(rest.len()));
                rest = after;
                envoy.buffer.extend_from_slice(read);
                let Ok((plan, reported)) = carry.scan(&mut Ranges::new(&envoy.buffer), |buf| {
                    Ok::<_, Infallible>(match hold_at {
                        Some(at) => hold(usize::from(at) % (buf.len() + 1)),
                        None => forward(None),
                    })
                });
                let held = matches!(plan, Plan::Hold { .. });
                let sent = envoy.apply(plan);
                if held {
                    prop_assert_eq!(reported, sent);
                }
            }
            envoy.buffer.extend_from_slice(rest);
            let Ok((plan, _)) = carry.scan(&mut Ranges::new(&envoy.buffer), |_| Ok::<_, Infallible>(forward(None)));
            envoy.apply(plan);
            prop_assert_eq!(envoy.forwarded, input);
        }
    }
}
