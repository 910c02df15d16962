//! Walks a client connection's bytes one operation at a time, the way Envoy presents them to a
//! network filter: after the filter forwards, only new bytes arrive; after it holds (pauses),
//! the next read presents the held bytes again followed by new ones. The scanner remembers how
//! far into a held buffer it got, so nothing is parsed twice, and how much of a message payload
//! is still to come, so payloads are skipped without being copied or scanned.

use super::line::{parse_client_line, ClientOp, Parsed};

/// A PUB or HPUB, as the handler sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Publish<'a> {
    pub subject: &'a [u8],
    pub reply: Option<&'a [u8]>,
    pub header_bytes: usize,
    pub total_bytes: usize,
}

/// What the handler decides for one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Forward,
    /// Refuse it and end the connection with this -ERR text (as nats-server does for a
    /// payload over max_payload).
    Close(&'static str),
}

/// The filter's side of the scan: attribution and limit decisions.
pub trait ClientHandler {
    fn connect(&mut self, json: &[u8]);
    fn publish(&mut self, publish: &Publish<'_>) -> Admission;
}

/// What the glue does with the buffer it passed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Let the whole buffer through.
    Forward,
    /// Keep the buffer and present it again with the next bytes (a control line is incomplete).
    Hold,
    /// Forward only the first `at` bytes, then end the connection with `-ERR '<error>'`.
    Close { at: usize, error: &'static str },
}

#[derive(Debug, Default)]
pub struct ClientStream {
    /// Bytes at the start of a held buffer that were already scanned.
    consumed: usize,
    /// Payload bytes (plus CRLF) of the current message not seen yet.
    payload_left: usize,
}

impl ClientStream {
    pub fn process(&mut self, buf: &[u8], handler: &mut impl ClientHandler) -> Outcome {
        let mut pos = self.consumed.min(buf.len());
        loop {
            if self.payload_left > 0 {
                let n = self.payload_left.min(buf.len() - pos);
                pos += n;
                self.payload_left -= n;
                if self.payload_left > 0 {
                    break;
                }
            }
            let Some(rest) = buf.get(pos..).filter(|r| !r.is_empty()) else {
                break;
            };
            match parse_client_line(rest) {
                Parsed::Incomplete => {
                    self.consumed = pos;
                    return Outcome::Hold;
                }
                Parsed::Error(e) => {
                    return Outcome::Close {
                        at: pos,
                        error: e.nats_error(),
                    }
                }
                Parsed::Op(op, line_len) => {
                    match op {
                        ClientOp::Connect { json } => handler.connect(json),
                        ClientOp::Pub {
                            subject,
                            reply,
                            header_bytes,
                            total_bytes,
                        } => {
                            let p = Publish {
                                subject,
                                reply,
                                header_bytes,
                                total_bytes,
                            };
                            match handler.publish(&p) {
                                Admission::Forward => self.payload_left = total_bytes + 2,
                                Admission::Close(error) => return Outcome::Close { at: pos, error },
                            }
                        }
                        ClientOp::Sub | ClientOp::Unsub | ClientOp::Ping | ClientOp::Pong => {}
                    }
                    pos += line_len;
                }
            }
        }
        self.consumed = 0;
        Outcome::Forward
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Default)]
    struct Recorder {
        users: Vec<Vec<u8>>,
        pubs: Vec<(Vec<u8>, Option<Vec<u8>>, usize, usize)>,
        max_payload: Option<usize>,
    }

    impl ClientHandler for Recorder {
        fn connect(&mut self, json: &[u8]) {
            self.users.push(json.to_vec());
        }
        fn publish(&mut self, p: &Publish<'_>) -> Admission {
            self.pubs.push((
                p.subject.to_vec(),
                p.reply.map(<[u8]>::to_vec),
                p.header_bytes,
                p.total_bytes,
            ));
            match self.max_payload {
                Some(max) if p.total_bytes > max => Admission::Close("Maximum Payload Violation"),
                _ => Admission::Forward,
            }
        }
    }

    /// Feeds `chunks` the way Envoy does: a held buffer is presented again with new bytes.
    /// Returns what was forwarded (a closing buffer's first `at` bytes included) and the error.
    fn feed(chunks: &[&[u8]], h: &mut Recorder) -> (Vec<u8>, Option<&'static str>) {
        let mut s = ClientStream::default();
        let mut held: Vec<u8> = Vec::new();
        let mut forwarded = Vec::new();
        for c in chunks {
            held.extend_from_slice(c);
            match s.process(&held, h) {
                Outcome::Forward => forwarded.append(&mut held),
                Outcome::Hold => {}
                Outcome::Close { at, error } => {
                    forwarded.extend_from_slice(&held[..at]);
                    return (forwarded, Some(error));
                }
            }
        }
        (forwarded, None)
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
        let (fwd, err) = feed(&[STREAM], &mut h);
        assert_eq!(err, None);
        assert_eq!(fwd, STREAM);
        assert_eq!(h.pubs, expected_pubs());
        assert_eq!(h.users, vec![b"{\"user\":\"acme\",\"headers\":true}".to_vec()]);
    }

    #[test]
    fn payloads_that_look_like_operations_are_skipped() {
        let mut h = Recorder::default();
        let stream = b"PUB a 6\r\nPUB b \r\nPING\r\n";
        feed(&[stream], &mut h);
        assert_eq!(h.pubs.len(), 1);
    }

    #[test]
    fn oversize_publish_closes_before_anything_of_it_is_forwarded() {
        let mut h = Recorder {
            max_payload: Some(4),
            ..Recorder::default()
        };
        let (fwd, err) = feed(
            &[b"PUB a 2\r\nhi\r\n", b"PUB b 1\r\n!\r\nPUB big 5\r\nhello\r\n"],
            &mut h,
        );
        assert_eq!(err, Some("Maximum Payload Violation"));
        assert_eq!(
            fwd, b"PUB a 2\r\nhi\r\nPUB b 1\r\n!\r\n",
            "messages before it pass; the oversized one never does"
        );
    }

    #[test]
    fn garbage_closes_with_the_servers_error() {
        let mut h = Recorder::default();
        assert_eq!(feed(&[b"HELLO\r\n"], &mut h).1, Some("Unknown Protocol Operation"));
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
            let (fwd, err) = feed(&chunks, &mut h);
            prop_assert_eq!(err, None);
            prop_assert_eq!(fwd, STREAM.to_vec());
            prop_assert_eq!(h.pubs, expected_pubs());
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512), split in 0usize..512) {
            let mut h = Recorder::default();
            let at = split.min(data.len());
            let _ = feed(&[&data[..at], &data[at..]], &mut h);
        }
    }

    #[test]
    fn every_single_split_point_yields_the_same_messages() {
        for at in 0..=STREAM.len() {
            let mut h = Recorder::default();
            let (fwd, _) = feed(&[&STREAM[..at], &STREAM[at..]], &mut h);
            assert_eq!(fwd, STREAM, "split at {at}");
            assert_eq!(h.pubs, expected_pubs(), "split at {at}");
        }
    }
}
