//! What a NATS connection's subscriber receives (limits.consume), told apart by what asked for it:
//!
//! - A JetStream pull (a publish to `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`) asks for
//!   what it receives: the glue holds it while the tenant is in debt, as it holds a Kafka
//!   Fetch, and the messages that answer it are charged. They keep their own subjects (they
//!   reach the pull's inbox by its subscription id); their reply, the subject that acknowledges
//!   them, names the stream and consumer (`$JS.ACK.<stream>.<consumer>.…`, or with a domain and
//!   an account hash before them).
//! - Anything else is a core delivery. nats-server gives a core subscriber no flow control,
//!   and Envoy cannot resume a write path it paused, so the gateway cannot slow one down: it is
//!   charged as it passes, and one the tenant's debt has outrun is a slow consumer (the glue
//!   ends its connection, as nats-server ends one).
//!
//! One read's deliveries are summed here so that the glue charges them once.

use std::collections::VecDeque;

use serde_json::{Map, Value};

use super::pulls::PULL_PREFIX;
use super::stream::Publish;

/// The consumers a connection pulls from that are remembered (a connection has few).
const PULLED_CONSUMERS: usize = 16;

/// The prefix of the subject that acknowledges a JetStream delivery.
const ACK_PREFIX: &[u8] = b"$JS.ACK.";

/// A pull that asks for more than `most` bytes (its JSON `max_bytes`) rewritten to ask for
/// `most`; None if it asks for no more, sets no `max_bytes`, or its body is not JSON the filter
/// reads (nats-server judges it as sent). A pull without `max_bytes` is left so: with one,
/// nats-server ends each completed batch with a `409 Batch Completed` status, which nats.go's
/// legacy `Fetch` returns as an error; a client that sets `max_bytes` handles those statuses
/// and `409 Message Size Exceeds MaxBytes` already. Its `batch` is kept: a client counts what it
/// is owed by it. Read only on the pull path, never per message.
pub fn pull_within(p: &Publish<'_>, most: u64) -> Option<Vec<u8>> {
    let mut request = serde_json::from_slice::<Map<String, Value>>(p.body?).ok()?;
    if request
        .get("max_bytes")
        .and_then(Value::as_u64)
        .is_none_or(|m| m == 0 || m <= most)
    {
        return None;
    }
    request.insert("max_bytes".to_owned(), Value::from(most));
    let body = serde_json::to_vec(&request).ok()?;
    let mut out = Vec::with_capacity(body.len() + p.subject.len() + 64);
    out.extend_from_slice(b"PUB ");
    out.extend_from_slice(p.subject);
    if let Some(reply) = p.reply {
        out.push(b' ');
        out.extend_from_slice(reply);
    }
    out.extend_from_slice(format!(" {}\r\n", body.len()).as_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(b"\r\n");
    Some(out)
}

/// What a delivered message answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// A pull, which matched this override (if one that limits consume).
    Pull(Option<usize>),
    Core,
}

/// A connection's pulls and the current read's deliveries.
#[derive(Debug, Default)]
pub struct Deliveries {
    /// `<stream>.<consumer>` of forwarded pulls, oldest first, each with the override it matched.
    pulls: VecDeque<(Box<[u8]>, Option<usize>)>,
    read: Tally,
}

/// What one read delivered.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    pub bytes: u64,
    pub messages: u64,
    /// Bytes and messages per override that limits consume (few: a connection's subjects
    /// match few).
    pub overrides: Vec<(usize, u64, u64)>,
}

impl Deliveries {
    /// A pull (to `subject`) was forwarded.
    pub fn pulled(&mut self, subject: &[u8], over: Option<usize>) {
        let Some(consumer) = subject.strip_prefix(PULL_PREFIX) else {
            return;
        };
        if let Some(known) = self.pulls.iter_mut().find(|(c, _)| **c == *consumer) {
            known.1 = over;
            return;
        }
        if self.pulls.len() == PULLED_CONSUMERS {
            self.pulls.pop_front();
        }
        self.pulls.push_back((consumer.into(), over));
    }

    /// What a message with this reply subject answers.
    pub fn delivery(&self, reply: Option<&[u8]>) -> Delivery {
        let Some(consumer) = reply.and_then(acked_consumer) else {
            return Delivery::Core;
        };
        let pulled = self.pulls.iter().find(|(c, _)| {
            c.len() == consumer.0.len() + 1 + consumer.1.len()
                && c.starts_with(consumer.0)
                && c.ends_with(consumer.1)
                && c.get(consumer.0.len()) == Some(&b'.')
        });
        match pulled {
            Some(&(_, over)) => Delivery::Pull(over),
            None => Delivery::Core,
        }
    }

    /// Counts a delivered message of `bytes` into this read, and into `over`'s bucket if any.
    pub fn count(&mut self, bytes: u64, over: Option<usize>) {
        let t = &mut self.read;
        t.bytes = t.bytes.saturating_add(bytes);
        t.messages += 1;
        if let Some(i) = over {
            match t.overrides.iter_mut().find(|(o, _, _)| *o == i) {
                Some((_, b, m)) => {
                    *b = b.saturating_add(bytes);
                    *m += 1;
                }
                None => t.overrides.push((i, bytes, 1)),
            }
        }
    }

    /// Hands this read's tally to `charge` (if it delivered anything) and starts the next.
    pub fn end_read(&mut self, charge: impl FnOnce(&Tally)) {
        if self.read.messages == 0 {
            return;
        }
        charge(&self.read);
        self.read.bytes = 0;
        self.read.messages = 0;
        self.read.overrides.clear();
    }
}

/// The stream and consumer an acknowledgement subject names: `$JS.ACK.<stream>.<consumer>` and
/// five tokens more, or `$JS.ACK.<domain>.<account hash>.<stream>.<consumer>` and six more.
fn acked_consumer(reply: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = reply.strip_prefix(ACK_PREFIX)?;
    let mut tokens = [&[][..]; 4];
    let mut n = 0;
    for t in rest.split(|&b| b == b'.') {
        if let Some(slot) = tokens.get_mut(n) {
            *slot = t;
        }
        n += 1;
    }
    match n {
        7 => Some((tokens[0], tokens[1])),
        n if n >= 10 => Some((tokens[2], tokens[3])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACK_V1: &[u8] = b"$JS.ACK.ORDERS.worker.1.42.42.1795734277114717067.0";
    const ACK_V2: &[u8] = b"$JS.ACK.hub.ACCHASH.ORDERS.worker.1.42.42.1795734277114717067.0.r4nd";

    #[test]
    fn deliveries_acknowledged_to_a_pulled_consumer_answer_its_pulls_and_others_are_core() {
        let mut d = Deliveries::default();
        assert_eq!(
            d.delivery(Some(ACK_V1)),
            Delivery::Core,
            "not pulled yet: a push consumer's"
        );
        d.pulled(b"$JS.API.CONSUMER.MSG.NEXT.ORDERS.worker", Some(2));
        assert_eq!(d.delivery(Some(ACK_V1)), Delivery::Pull(Some(2)));
        assert_eq!(
            d.delivery(Some(ACK_V2)),
            Delivery::Pull(Some(2)),
            "with a domain and an account hash"
        );
        assert_eq!(d.delivery(Some(b"$JS.ACK.ORDERS.work.1.42.42.1.0")), Delivery::Core);
        assert_eq!(d.delivery(Some(b"$JS.ACK.ORDERSworker.1.42.42.1.0")), Delivery::Core);
        assert_eq!(d.delivery(Some(b"_INBOX.x")), Delivery::Core);
        assert_eq!(d.delivery(None), Delivery::Core);
    }

    #[test]
    fn a_consumer_pulled_again_is_remembered_once_and_the_oldest_are_forgotten() {
        let mut d = Deliveries::default();
        for _ in 0..3 {
            d.pulled(b"$JS.API.CONSUMER.MSG.NEXT.ORDERS.worker", None);
        }
        assert_eq!(d.pulls.len(), 1);
        for i in 0..PULLED_CONSUMERS {
            d.pulled(format!("$JS.API.CONSUMER.MSG.NEXT.S{i}.c").as_bytes(), None);
        }
        assert_eq!(d.pulls.len(), PULLED_CONSUMERS);
        assert_eq!(d.delivery(Some(ACK_V1)), Delivery::Core, "the oldest went");
        assert_eq!(d.delivery(Some(b"$JS.ACK.S0.c.1.1.1.1.0")), Delivery::Pull(None));
    }

    fn pull(body: &[u8]) -> Publish<'_> {
        Publish {
            subject: b"$JS.API.CONSUMER.MSG.NEXT.S.c",
            reply: Some(b"_INBOX.r"),
            header_bytes: 0,
            total_bytes: body.len(),
            body: Some(body),
            server_max_payload: None,
        }
    }

    fn rewritten(body: &[u8], most: u64) -> Option<String> {
        pull_within(&pull(body), most).map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    #[test]
    fn a_pull_that_asks_for_more_bytes_than_the_burst_asks_for_the_burst_and_keeps_the_rest() {
        let json = br#"{"batch":500,"expires":30000000000,"idle_heartbeat":15000000000,"max_bytes":1000000}"#;
        assert_eq!(
            rewritten(json, 32768).as_deref(),
            Some(
                "PUB $JS.API.CONSUMER.MSG.NEXT.S.c _INBOX.r 82\r\n\
{\"batch\":500,\"expires\":30000000000,\"idle_heartbeat\":15000000000,\"max_bytes\":32768}\r\n"
            )
        );
        assert_eq!(
            rewritten(br#"{"batch":5,"max_bytes":1000}"#, 32768),
            None,
            "already within"
        );
        assert_eq!(rewritten(br#"{"batch":5}"#, 64), None, "no max_bytes: left so");
        assert_eq!(rewritten(br#"{"batch":5,"max_bytes":0}"#, 64), None);
        assert_eq!(rewritten(b"", 64), None, "one message");
        assert_eq!(rewritten(b"10", 64), None, "a plain count");
        assert_eq!(rewritten(b"[1]", 64), None, "not a pull request the filter reads");
        assert_eq!(rewritten(b"{", 64), None);
    }

    #[test]
    fn a_read_is_charged_once_with_its_sums_and_the_next_starts_empty() {
        let mut d = Deliveries::default();
        d.count(100, None);
        d.count(50, Some(1));
        d.count(25, Some(1));
        d.count(5, Some(3));
        let mut charged = Vec::new();
        d.end_read(|t| charged.push(t.clone()));
        d.end_read(|t| charged.push(t.clone()));
        assert_eq!(
            charged,
            vec![Tally {
                bytes: 180,
                messages: 4,
                overrides: vec![(1, 75, 2), (3, 5, 1)]
            }]
        );
        d.count(7, None);
        d.end_read(|t| charged.push(t.clone()));
        assert_eq!(charged[1].bytes, 7);
        assert!(charged[1].overrides.is_empty());
    }
}
