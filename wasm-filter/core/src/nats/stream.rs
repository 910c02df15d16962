//! Walks a client connection's bytes one operation at a time, the way Envoy presents them to a
//! network filter: after the filter forwards, only new bytes arrive; after it holds (pauses),
//! the next read presents the held bytes again followed by new ones. The scanner remembers how
//! far into a held buffer it got, so nothing is parsed twice, and how much of a message payload
//! is still to come, so payloads are skipped without being copied or scanned.

use super::line::{parse_client_line, ClientOp, Parsed, MAX_CONTROL_LINE};
use super::pulls::is_pull;
use super::reading::{ahead_after, line_at};
use crate::edit::Editor;
use crate::scan::{Admission, Outcome};
use crate::source::Source;

/// A PUB or HPUB, as the handler sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Publish<'a> {
    pub subject: &'a [u8],
    pub reply: Option<&'a [u8]>,
    pub header_bytes: usize,
    pub total_bytes: usize,
    /// A JetStream pull's request body, read with its control line (see [`PULL_BODY_MAX`]).
    pub body: Option<&'a [u8]>,
    /// The server's max_payload, once its INFO said (the session fills it in).
    pub server_max_payload: Option<u64>,
}

/// A JetStream pull's body (`{"batch":…,"expires":…,…}`) up to this size is read whole before
/// the pull is decided, so that the pull can be rewritten (limits.consume keeps its max_bytes
/// within the burst); a larger one is decided on its control line as any message is.
pub const PULL_BODY_MAX: usize = 4096;

/// The filter's side of the scan: attribution and limit decisions.
pub trait ClientHandler {
    fn connect(&mut self, json: &[u8]) -> Admission;
    fn ping(&mut self);
    /// True while the gateway owes the client more than it may (crate::backlog): the next
    /// operation, whatever it is, is held until that changes. `at`: where the operation starts
    /// in the input; `rest`: the bytes of the input from it on.
    fn backlogged(&self, _at: usize, _rest: usize) -> bool {
        false
    }
    fn publish(&mut self, publish: &Publish<'_>) -> Admission;
    /// A SUB to `subject`.
    fn subscribe(&mut self, subject: &[u8]) -> Admission;
}

#[derive(Debug, Default)]
pub struct ClientStream {
    /// Bytes at the start of a held buffer that were already scanned.
    consumed: usize,
    /// Payload bytes (plus CRLF) of the current message not seen yet, and whether they are dropped.
    payload_left: usize,
    dropping: bool,
    /// Nothing more from this client is forwarded.
    closed: bool,
    /// The size of the last message: what to fetch at the next control line depends on it
    /// (see super::reading).
    last_size: usize,
}

impl ClientStream {
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    pub fn process(&mut self, src: &mut dyn Source, handler: &mut impl ClientHandler) -> Outcome {
        if self.closed {
            return Outcome {
                hold: false,
                replace: Some(Vec::new()),
                decided: 0,
            };
        }
        let len = src.len();
        let mut edit = Editor::default();
        let mut pos = self.consumed.min(len);
        loop {
            if self.payload_left > 0 {
                let n = self.payload_left.min(len - pos);
                if self.dropping {
                    edit.replace(len, pos, pos + n, &[]);
                }
                pos += n;
                self.payload_left -= n;
                if self.payload_left > 0 {
                    break;
                }
            }
            if pos >= len {
                break;
            }
            if handler.backlogged(pos, len - pos) {
                return self.hold_at(pos, edit, src);
            }
            let line = line_at(src, pos, ahead_after(self.last_size), MAX_CONTROL_LINE + 1);
            let (admission, line_len, payload) = match parse_client_line(line) {
                Parsed::Incomplete => return self.hold_at(pos, edit, src),
                Parsed::Error(_) => {
                    // Let nats-server see the fault and answer in its own words; forward nothing after.
                    self.closed = true;
                    return Outcome {
                        hold: false,
                        replace: edit.finish(src, len),
                        decided: 0,
                    };
                }
                Parsed::Op(op, line_len) => match op {
                    ClientOp::Connect { json } => (handler.connect(json), line_len, 0),
                    ClientOp::Ping => {
                        handler.ping();
                        (Admission::Forward, line_len, 0)
                    }
                    ClientOp::Pub {
                        subject,
                        reply,
                        header_bytes,
                        total_bytes,
                    } => {
                        self.last_size = total_bytes;
                        let whole = pos + line_len + total_bytes + 2;
                        if header_bytes == 0 && total_bytes <= PULL_BODY_MAX && is_pull(subject) {
                            if whole > len {
                                return self.hold_at(pos, edit, src);
                            }
                            (self.pull(src, pos, whole, handler), line_len, total_bytes + 2)
                        } else {
                            let p = Publish {
                                subject,
                                reply,
                                header_bytes,
                                total_bytes,
                                body: None,
                                server_max_payload: None,
                            };
                            (handler.publish(&p), line_len, total_bytes + 2)
                        }
                    }
                    ClientOp::Sub { subject: Some(subject) } => (handler.subscribe(subject), line_len, 0),
                    ClientOp::Sub { subject: None } | ClientOp::Unsub | ClientOp::Pong => {
                        (Admission::Forward, line_len, 0)
                    }
                },
            };
            let end = pos + line_len + payload;
            let forwarded = admission == Admission::Forward;
            match admission {
                Admission::Forward => {}
                Admission::Hold => return self.hold_at(pos, edit, src),
                Admission::Replace(with) => edit.replace(len, pos, end, &with),
                Admission::Close(with) => {
                    self.closed = true;
                    edit.replace(len, pos, len, &with);
                    return Outcome {
                        hold: false,
                        replace: edit.finish(src, len),
                        decided: 0,
                    };
                }
            }
            self.dropping = end > len && !forwarded;
            self.payload_left = end.saturating_sub(len);
            pos = end.min(len);
        }
        self.consumed = 0;
        Outcome {
            hold: false,
            replace: edit.finish(src, len),
            decided: 0,
        }
    }

    /// A JetStream pull whose control line and body are all at `pos..whole`: the handler
    /// decides it with its body.
    fn pull(&self, src: &mut dyn Source, pos: usize, whole: usize, handler: &mut impl ClientHandler) -> Admission {
        let bytes = src.at(pos, whole - pos);
        let Parsed::Op(
            ClientOp::Pub {
                subject,
                reply,
                header_bytes,
                total_bytes,
            },
            line_len,
        ) = parse_client_line(bytes)
        else {
            return Admission::Forward; // parsed a moment ago: unreachable
        };
        let p = Publish {
            subject,
            reply,
            header_bytes,
            total_bytes,
            body: bytes.get(line_len..line_len + total_bytes),
            server_max_payload: None,
        };
        handler.publish(&p)
    }

    /// The first `n` bytes of a held buffer were forwarded: the next buffer starts after them.
    pub fn forwarded(&mut self, n: usize) {
        self.consumed = self.consumed.saturating_sub(n);
    }

    fn hold_at(&mut self, pos: usize, edit: Editor, src: &mut dyn Source) -> Outcome {
        self.consumed = edit.output_offset(pos);
        let len = src.len();
        Outcome {
            hold: true,
            replace: edit.finish(src, len),
            decided: self.consumed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::reading::LINE_READ;
    use super::*;
    use crate::source::Ranges;
    use proptest::prelude::*;

    #[derive(Default)]
    struct Recorder {
        users: Vec<Vec<u8>>,
        pings: usize,
        pubs: Vec<(Vec<u8>, Option<Vec<u8>>, usize, usize)>,
        max_payload: Option<usize>,
        refuse_subject: Option<&'static [u8]>,
        hold_times: usize,
        /// The body each publish came with.
        bodies: Vec<Option<Vec<u8>>>,
        /// JetStream pulls are replaced by `PULL`.
        rewrite_pulls: bool,
    }

    impl ClientHandler for Recorder {
        fn connect(&mut self, json: &[u8]) -> Admission {
            self.users.push(json.to_vec());
            Admission::Forward
        }
        fn ping(&mut self) {
            self.pings += 1;
        }
        fn subscribe(&mut self, _: &[u8]) -> Admission {
            Admission::Forward
        }
        fn publish(&mut self, p: &Publish<'_>) -> Admission {
            if self.hold_times > 0 {
                self.hold_times -= 1;
                return Admission::Hold;
            }
            self.pubs.push((
                p.subject.to_vec(),
                p.reply.map(<[u8]>::to_vec),
                p.header_bytes,
                p.total_bytes,
            ));
            self.bodies.push(p.body.map(<[u8]>::to_vec));
            if Some(p.subject) == self.refuse_subject {
                return Admission::Replace(b"PING\r\n".to_vec());
            }
            if self.rewrite_pulls && p.body.is_some() {
                return Admission::Replace(b"PULL\r\n".to_vec());
            }
            match self.max_payload {
                Some(max) if p.total_bytes > max => Admission::Close(b"BAD\r\n".to_vec()),
                _ => Admission::Forward,
            }
        }
    }

    #[test]
    fn a_pull_is_decided_with_its_whole_body_at_any_split() {
        let stream: &[u8] =
            b"PUB a 1\r\nx\r\nPUB $JS.API.CONSUMER.MSG.NEXT.S.c _INBOX.r 11\r\n{\"batch\":5}\r\nPUB b 1\r\ny\r\n";
        for at in 0..=stream.len() {
            let mut h = Recorder {
                rewrite_pulls: true,
                ..Recorder::default()
            };
            let out = feed(&[&stream[..at], &stream[at..]], &mut h);
            assert_eq!(out, b"PUB a 1\r\nx\r\nPULL\r\nPUB b 1\r\ny\r\n", "split at {at}");
            assert_eq!(
                h.bodies,
                vec![None, Some(b"{\"batch\":5}".to_vec()), None],
                "split at {at}"
            );
        }
    }

    /// Feeds `chunks` the way Envoy does and returns what reaches the server.
    fn feed(chunks: &[&[u8]], h: &mut Recorder) -> Vec<u8> {
        let mut s = ClientStream::default();
        let mut held: Vec<u8> = Vec::new();
        let mut forwarded = Vec::new();
        for c in chunks {
            held.extend_from_slice(c);
            let o = s.process(&mut Ranges::new(&held), h);
            if let Some(r) = o.replace {
                held = r;
            }
            if !o.hold {
                forwarded.append(&mut held);
            }
        }
        // Any hold is retried once more, as a tick would.
        if !held.is_empty() {
            let o = s.process(&mut Ranges::new(&held), h);
            if let Some(r) = o.replace {
                held = r;
            }
            if !o.hold {
                forwarded.append(&mut held);
            }
        }
        forwarded
    }

    const STREAM: &[u8] = b"CONNECT {\"user\":\"acme\",\"headers\":true}\r\nPING\r\nSUB a.> 1\r\n\
PUB orders.new 5\r\nhello\r\nHPUB orders.x _INBOX.9 12 14\r\nNATS/1.0\r\n\r\nhi\r\n\
PUB e 0\r\n\r\nPUB crlf.inside 4\r\n\r\n\r\n\r\nUNSUB 1\r\nPONG\r\n";

    fn expected_pubs() -> Vec<(Vec<u8>, Option<Vec<u8>>, usize, usize)> {
        vec![
            (b"orders.new".to_vec(), None, 0, 5),
            (b"orders.x".to_vec(), Some(b"_INBOX.9".to_vec()), 12, 14),
            (b"e".to_vec(), None, 0, 0),
            (b"crlf.inside".to_vec(), None, 0, 4),
        ]
    }

    #[test]
    fn whole_stream_yields_every_message_once() {
        let mut h = Recorder::default();
        assert_eq!(feed(&[STREAM], &mut h), STREAM);
        assert_eq!(h.pubs, expected_pubs());
        assert_eq!(h.users, vec![b"{\"user\":\"acme\",\"headers\":true}".to_vec()]);
        assert_eq!(h.pings, 1);
    }

    #[test]
    fn payloads_that_look_like_operations_are_skipped() {
        let mut h = Recorder::default();
        feed(&[b"PUB a 6\r\nPUB b \r\nPING\r\n"], &mut h);
        assert_eq!(h.pubs.len(), 1);
        assert_eq!(h.pings, 1);
    }

    #[test]
    fn close_forwards_what_came_before_then_the_replacement_and_nothing_after() {
        let mut h = Recorder {
            max_payload: Some(4),
            ..Recorder::default()
        };
        let fwd = feed(
            &[
                b"PUB a 2\r\nhi\r\n",
                b"PUB b 1\r\n!\r\nPUB big 5\r\nhello\r\nPUB c 1\r\n!\r\n",
                b"PING\r\n",
            ],
            &mut h,
        );
        assert_eq!(fwd, b"PUB a 2\r\nhi\r\nPUB b 1\r\n!\r\nBAD\r\n");
    }

    #[test]
    fn a_refused_message_is_replaced_even_when_its_payload_spans_reads() {
        let mut h = Recorder {
            refuse_subject: Some(b"no"),
            ..Recorder::default()
        };
        let fwd = feed(
            &[b"PUB a 1\r\n!\r\nPUB no 10\r\n01234", b"56789\r\nPUB b 1\r\n?\r\n"],
            &mut h,
        );
        assert_eq!(fwd, b"PUB a 1\r\n!\r\nPING\r\nPUB b 1\r\n?\r\n");
    }

    /// Refuses the first message and holds the second once.
    struct RefuseThenHold {
        calls: usize,
        decided: Vec<Vec<u8>>,
    }

    impl ClientHandler for RefuseThenHold {
        fn connect(&mut self, _: &[u8]) -> Admission {
            Admission::Forward
        }
        fn ping(&mut self) {}
        fn subscribe(&mut self, _: &[u8]) -> Admission {
            Admission::Forward
        }
        fn publish(&mut self, p: &Publish<'_>) -> Admission {
            self.calls += 1;
            match self.calls {
                1 => Admission::Replace(b"PING\r\n".to_vec()),
                2 => Admission::Hold,
                _ => {
                    self.decided.push(p.subject.to_vec());
                    Admission::Forward
                }
            }
        }
    }

    #[test]
    fn a_held_message_is_decided_again_and_what_was_edited_before_it_stays_edited() {
        let mut h = RefuseThenHold {
            calls: 0,
            decided: Vec::new(),
        };
        let mut s = ClientStream::default();
        let first = s.process(&mut Ranges::new(b"PUB no 3\r\nabc\r\nPUB later 1\r\nx\r\n"), &mut h);
        assert!(first.hold);
        assert_eq!(
            first.decided, 6,
            "the PING that replaced the refused message may go now"
        );
        let held = first.replace.unwrap_or_default();
        assert_eq!(held, b"PING\r\nPUB later 1\r\nx\r\n");
        let second = s.process(&mut Ranges::new(&held), &mut h);
        assert_eq!(
            second,
            Outcome {
                hold: false,
                replace: None,
                decided: 0
            }
        );
        assert_eq!(
            h.decided,
            vec![b"later".to_vec()],
            "the held message was decided again, once"
        );
    }

    #[test]
    fn garbage_is_forwarded_for_the_server_to_refuse_and_nothing_after_it() {
        let mut h = Recorder::default();
        let mut s = ClientStream::default();
        let o = s.process(&mut Ranges::new(b"PING\r\nHELLO\r\n"), &mut h);
        assert_eq!(
            o,
            Outcome {
                hold: false,
                replace: None,
                decided: 0
            }
        );
        assert!(s.is_closed());
        assert_eq!(
            s.process(&mut Ranges::new(b"PUB a 1\r\n!\r\n"), &mut h).replace,
            Some(Vec::new())
        );
    }

    proptest! {
        #[test]
        fn any_split_yields_the_same_messages(cuts in proptest::collection::btree_set(1..STREAM.len(), 0..12)) {
            let mut chunks = Vec::new();
            let mut last = 0;
            for c in cuts.iter().copied().chain(std::iter::once(STREAM.len())) {
                chunks.push(&STREAM[last..c]);
                last = c;
            }
            let mut h = Recorder::default();
            prop_assert_eq!(feed(&chunks, &mut h), STREAM.to_vec());
            prop_assert_eq!(h.pubs, expected_pubs());
        }

        #[test]
        fn refusals_are_exact_at_any_split(cuts in proptest::collection::btree_set(1..60usize, 0..8)) {
            let stream: &[u8] = b"PUB a 2\r\nok\r\nPUB no 7\r\nrefused\r\nPING\r\nPUB b 2\r\nok\r\n";
            let mut chunks = Vec::new();
            let mut last = 0;
            for c in cuts.iter().copied().filter(|&c| c < stream.len()).chain(std::iter::once(stream.len())) {
                chunks.push(&stream[last..c]);
                last = c;
            }
            let mut h = Recorder { refuse_subject: Some(b"no"), ..Recorder::default() };
            prop_assert_eq!(feed(&chunks, &mut h), b"PUB a 2\r\nok\r\nPING\r\nPING\r\nPUB b 2\r\nok\r\n".to_vec());
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512), split in 0usize..512) {
            let mut h = Recorder { refuse_subject: Some(b"a"), max_payload: Some(3), ..Recorder::default() };
            let at = split.min(data.len());
            let _ = feed(&[&data[..at], &data[at..]], &mut h);
        }
    }

    /// Feeds `chunks` as Envoy does and returns what reaches the server and how many bytes the
    /// scanner had served.
    fn feed_counting(chunks: &[&[u8]], h: &mut Recorder) -> (Vec<u8>, usize) {
        let mut s = ClientStream::default();
        let mut held: Vec<u8> = Vec::new();
        let (mut forwarded, mut served) = (Vec::new(), 0);
        for c in chunks {
            held.extend_from_slice(c);
            let mut src = Ranges::new(&held);
            let o = s.process(&mut src, h);
            served += src.served;
            if let Some(r) = o.replace {
                held = r;
            }
            if !o.hold {
                forwarded.append(&mut held);
            }
        }
        (forwarded, served)
    }

    /// PUBs of these payload sizes, each payload a run of 'x'.
    fn publishes(sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, size) in sizes.iter().enumerate() {
            out.extend_from_slice(format!("PUB s.{i} {size}\r\n").as_bytes());
            out.resize(out.len() + size, b'x');
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    #[test]
    fn large_payloads_are_stepped_over_unread() {
        let sizes = [64 << 10; 16];
        let stream = publishes(&sizes);
        // Reads of 16 KiB, as Envoy makes them.
        let chunks: Vec<&[u8]> = stream.chunks(16 << 10).collect();
        let mut h = Recorder::default();
        let (forwarded, served) = feed_counting(&chunks, &mut h);
        assert!(forwarded == stream, "every byte forwarded, once, in order");
        assert_eq!(h.pubs.iter().map(|p| p.3).collect::<Vec<_>>(), sizes);
        // The first read is read through (nothing is known of the sizes yet); after it, a
        // control line each.
        assert!(
            served <= (16 << 10) + sizes.len() * LINE_READ,
            "{served} of {} bytes read",
            stream.len()
        );
    }

    #[test]
    fn small_messages_are_read_through_in_one_host_read() {
        let stream = publishes(&[128; 400]);
        let mut src = Ranges::new(&stream);
        let mut h = Recorder::default();
        let o = ClientStream::default().process(&mut src, &mut h);
        assert_eq!((o.hold, o.replace), (false, None));
        assert_eq!(h.pubs.len(), 400);
        assert_eq!(src.reads, 1, "one host read for the whole buffer");
    }

    proptest! {
        /// Mixed sizes, small and over the read-through size, cut anywhere: the same messages,
        /// every byte forwarded once and in order.
        #[test]
        fn mixed_sizes_at_any_split_yield_every_message_once(
            sizes in proptest::collection::vec(prop_oneof![0usize..300, 2000usize..70_000], 1..12),
            cuts in proptest::collection::vec(1usize..40_000, 0..24),
        ) {
            let stream = publishes(&sizes);
            let mut chunks = Vec::new();
            let mut rest = stream.as_slice();
            for c in cuts {
                let (a, b) = rest.split_at(c.min(rest.len()));
                chunks.push(a);
                rest = b;
            }
            chunks.push(rest);
            let mut h = Recorder::default();
            let (forwarded, _) = feed_counting(&chunks, &mut h);
            prop_assert!(forwarded == stream);
            prop_assert_eq!(h.pubs.iter().map(|p| p.3).collect::<Vec<_>>(), sizes);
        }
    }

    #[test]
    fn every_single_split_point_yields_the_same_messages() {
        for at in 0..=STREAM.len() {
            let mut h = Recorder::default();
            assert_eq!(feed(&[&STREAM[..at], &STREAM[at..]], &mut h), STREAM, "split at {at}");
            assert_eq!(h.pubs, expected_pubs(), "split at {at}");
        }
    }
}
