//! The server → client direction: INFO, MSG/HMSG, PING, PONG, +OK, -ERR. The filter reads it to
//! release in-flight requests when their reply passes, to swap the PONGs that answer its own
//! PINGs for the errors it owes the client, and to advertise the tenant's max_payload in INFO.
//!
//! Unlike the client direction this one is never paused: a control line split across reads is
//! cut from the forwarded bytes and carried (bounded) into the next read.

use super::reading::{ahead_after, line_at};
use crate::edit::{scan_carried, Editor};
use crate::source::Source;

/// nats-server's INFO can outgrow the client's 4 KiB control line (cluster URLs). A line longer
/// than this is unreadable: nothing more is forwarded ([`ServerHandler::too_long`]), since only
/// an INFO grows so long and an INFO is never forwarded unchecked (super::info).
pub const MAX_SERVER_LINE: usize = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerOp<'a> {
    Info {
        json: &'a [u8],
    },
    /// MSG or HMSG.
    Msg(Delivered<'a>),
    Ping,
    Pong,
    /// `+OK`: a verbose client's operation (its CONNECT first) was accepted.
    Ok,
    /// `-ERR '<text>'`; the text without its quotes.
    Err {
        text: &'a [u8],
    },
    /// Anything this filter does not interpret.
    Other,
}

/// A message delivered to the client (MSG or HMSG).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered<'a> {
    /// The subject it was published on (a JetStream consumer's delivery keeps its message's).
    pub subject: &'a [u8],
    pub reply: Option<&'a [u8]>,
    /// Payload bytes, headers included.
    pub bytes: usize,
    /// Headers and no body: a status (JetStream's heartbeats, timeouts, no-responders).
    pub status: bool,
}

/// What to do with one server operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEdit {
    Keep,
    /// Keep the operation and insert these bytes after its control line (never inside a payload:
    /// only used for operations without one).
    KeepThenInsert(Vec<u8>),
    Replace(Vec<u8>),
    /// Replace the operation and forward nothing more from the server.
    ReplaceThenEnd(Vec<u8>),
}

pub trait ServerHandler {
    fn op(&mut self, op: &ServerOp<'_>) -> ServerEdit;
    /// A control line longer than MAX_SERVER_LINE: the stream forwards nothing from it on.
    fn too_long(&mut self);
}

enum Line<'a> {
    Incomplete,
    TooLong,
    Op {
        op: ServerOp<'a>,
        line_len: usize,
        payload: usize,
    },
}

fn parse_server_line(buf: &[u8]) -> Line<'_> {
    let window = &buf[..buf.len().min(MAX_SERVER_LINE)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= MAX_SERVER_LINE {
            Line::TooLong
        } else {
            Line::Incomplete
        };
    };
    let mut line = &window[..lf];
    if let [rest @ .., b'\r'] = line {
        line = rest;
    }
    let mut parts = line.split(|&b| b == b' ' || b == b'\t').filter(|p| !p.is_empty());
    let op = parts.next().unwrap_or_default();
    let (op, payload) = if op.eq_ignore_ascii_case(b"MSG") || op.eq_ignore_ascii_case(b"HMSG") {
        // subject sid [reply] [#header] #total: the subject is first and the size is last.
        let number = |s: &[u8]| std::str::from_utf8(s).ok().and_then(|s| s.parse::<usize>().ok());
        let headers = op.len() == 4;
        let mut tokens = [&[][..]; 5];
        let mut n = 0;
        for p in parts.by_ref() {
            if n == tokens.len() {
                n += 1;
                break;
            }
            tokens[n] = p;
            n += 1;
        }
        let fields = if headers { 4 } else { 3 };
        let size = n
            .checked_sub(1)
            .and_then(|last| tokens.get(last))
            .and_then(|s| number(s));
        match size {
            Some(size) if n == fields || n == fields + 1 => {
                let status = headers && tokens.get(n - 2).and_then(|h| number(h)) == Some(size);
                let d = Delivered {
                    subject: tokens[0],
                    reply: (n == fields + 1).then_some(tokens[2]),
                    bytes: size,
                    status,
                };
                (ServerOp::Msg(d), size + 2)
            }
            _ => (ServerOp::Other, 0),
        }
    } else if op.eq_ignore_ascii_case(b"INFO") {
        let json = line.get(4..).unwrap_or_default();
        let start = json.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(json.len());
        (ServerOp::Info { json: &json[start..] }, 0)
    } else if op.eq_ignore_ascii_case(b"PING") {
        (ServerOp::Ping, 0)
    } else if op.eq_ignore_ascii_case(b"PONG") {
        (ServerOp::Pong, 0)
    } else if op.eq_ignore_ascii_case(b"+OK") {
        (ServerOp::Ok, 0)
    } else if op.eq_ignore_ascii_case(b"-ERR") {
        let text = line.get(4..).unwrap_or_default().trim_ascii();
        let text = text
            .strip_prefix(b"'")
            .and_then(|t| t.strip_suffix(b"'"))
            .unwrap_or(text);
        (ServerOp::Err { text }, 0)
    } else {
        (ServerOp::Other, 0)
    };
    Line::Op {
        op,
        line_len: lf + 1,
        payload,
    }
}

#[derive(Debug, Default)]
pub struct ServerStream {
    carry: Vec<u8>,
    payload_left: usize,
    ended: bool,
    /// The size of the last message: what to fetch at the next control line depends on it
    /// (see super::reading).
    last_size: usize,
}

impl ServerStream {
    /// Scans one read; returns the bytes to forward instead, if they differ.
    pub fn process(&mut self, src: &mut dyn Source, handler: &mut impl ServerHandler) -> Option<Vec<u8>> {
        if self.ended {
            return Some(Vec::new());
        }
        let ServerStream {
            carry,
            payload_left,
            ended,
            last_size,
        } = self;
        scan_carried(carry, src, |data| {
            let len = data.len();
            let mut edit = Editor::default();
            let mut pos = 0;
            loop {
                if *payload_left > 0 {
                    let n = (*payload_left).min(len - pos);
                    pos += n;
                    *payload_left -= n;
                    if *payload_left > 0 {
                        break;
                    }
                }
                if pos >= len {
                    break;
                }
                let (edited, line_end, payload) =
                    match parse_server_line(line_at(data, pos, ahead_after(*last_size), MAX_SERVER_LINE)) {
                        Line::Incomplete => return (edit, pos),
                        Line::TooLong => {
                            handler.too_long();
                            edit.replace(len, pos, len, &[]);
                            *ended = true;
                            return (edit, len);
                        }
                        Line::Op { op, line_len, payload } => {
                            if matches!(op, ServerOp::Msg(_)) {
                                *last_size = payload;
                            }
                            (handler.op(&op), pos + line_len, payload)
                        }
                    };
                match edited {
                    ServerEdit::Keep => {}
                    ServerEdit::KeepThenInsert(with) => edit.replace(len, line_end, line_end, &with),
                    ServerEdit::Replace(with) => edit.replace(len, pos, line_end, &with),
                    ServerEdit::ReplaceThenEnd(with) => {
                        edit.replace(len, pos, len, &with);
                        *ended = true;
                        return (edit, len);
                    }
                }
                *payload_left = payload;
                pos = line_end;
            }
            (edit, len)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reading::LINE_READ;
    use super::*;
    use crate::source::Ranges;
    use proptest::prelude::*;

    /// Replaces every PONG with -ERR and records message subjects.
    #[derive(Default)]
    struct Swap {
        subjects: Vec<Vec<u8>>,
        infos: usize,
        too_long: usize,
    }

    impl ServerHandler for Swap {
        fn op(&mut self, op: &ServerOp<'_>) -> ServerEdit {
            match op {
                ServerOp::Msg(d) => {
                    self.subjects.push(d.subject.to_vec());
                    ServerEdit::Keep
                }
                ServerOp::Pong => ServerEdit::Replace(b"-ERR 'x'\r\n".to_vec()),
                ServerOp::Info { .. } => {
                    self.infos += 1;
                    ServerEdit::KeepThenInsert(b"+OK\r\n".to_vec())
                }
                _ => ServerEdit::Keep,
            }
        }

        fn too_long(&mut self) {
            self.too_long += 1;
        }
    }

    const STREAM: &[u8] = b"INFO {\"max_payload\":1048576}\r\nPONG\r\nMSG a.b 1 5\r\nPONG!\r\n\
HMSG _INBOX.x.1 2 _INBOX.r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\nPONG\r\n";
    const WANT: &[u8] = b"INFO {\"max_payload\":1048576}\r\n+OK\r\n-ERR 'x'\r\nMSG a.b 1 5\r\nPONG!\r\n\
HMSG _INBOX.x.1 2 _INBOX.r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n-ERR 'x'\r\n";

    fn feed(chunks: &[&[u8]], h: &mut Swap) -> Vec<u8> {
        let mut s = ServerStream::default();
        let mut out = Vec::new();
        for c in chunks {
            match s.process(&mut Ranges::new(c), h) {
                Some(r) => out.extend(r),
                None => out.extend_from_slice(c),
            }
        }
        out
    }

    #[test]
    fn edits_only_control_lines_never_payloads() {
        let mut h = Swap::default();
        assert_eq!(feed(&[STREAM], &mut h), WANT);
        assert_eq!(h.subjects, vec![b"a.b".to_vec(), b"_INBOX.x.1".to_vec()]);
        assert_eq!(h.infos, 1);
    }

    /// Records every delivery as parsed.
    #[derive(Default)]
    struct Deliveries(Vec<(Vec<u8>, Option<Vec<u8>>, usize, bool)>);

    impl ServerHandler for Deliveries {
        fn op(&mut self, op: &ServerOp<'_>) -> ServerEdit {
            if let ServerOp::Msg(d) = op {
                self.0
                    .push((d.subject.to_vec(), d.reply.map(<[u8]>::to_vec), d.bytes, d.status));
            }
            ServerEdit::Keep
        }

        fn too_long(&mut self) {}
    }

    #[test]
    fn deliveries_carry_their_reply_their_size_and_whether_they_are_a_status() {
        let stream = b"MSG a 1 2\r\nhi\r\nMSG b 2 $JS.ACK.S.c.1.1.1.1.0 3\r\nyou\r\n\
HMSG _INBOX.x 3 28 28\r\nNATS/1.0 100 Idle Heartbeat\r\n\r\n\r\nHMSG c 4 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n\
MSG d 5 r x 3\r\nbad\r\n";
        let mut h = Deliveries::default();
        ServerStream::default().process(&mut Ranges::new(stream), &mut h);
        let reply = |r: &[u8]| Some(r.to_vec());
        assert_eq!(
            h.0,
            vec![
                (b"a".to_vec(), None, 2, false),
                (b"b".to_vec(), reply(b"$JS.ACK.S.c.1.1.1.1.0"), 3, false),
                (b"_INBOX.x".to_vec(), None, 28, true),
                (b"c".to_vec(), reply(b"r"), 14, false),
            ]
        );
    }

    #[test]
    fn unedited_reads_are_forwarded_as_they_are() {
        let mut s = ServerStream::default();
        assert_eq!(
            s.process(&mut Ranges::new(b"MSG a 1 2\r\nhi\r\nPING\r\n"), &mut Swap::default()),
            None
        );
    }

    #[test]
    fn every_split_point_gives_the_same_output() {
        for at in 0..=STREAM.len() {
            let mut h = Swap::default();
            assert_eq!(feed(&[&STREAM[..at], &STREAM[at..]], &mut h), WANT, "split at {at}");
            assert_eq!(h.subjects.len(), 2, "split at {at}");
        }
    }

    #[test]
    fn large_deliveries_are_stepped_over_unread() {
        let mut stream = Vec::new();
        for i in 0..16 {
            stream.extend_from_slice(format!("MSG s.{i} 1 65536\r\n").as_bytes());
            stream.resize(stream.len() + 65536, b'x');
            stream.extend_from_slice(b"\r\n");
        }
        let (mut s, mut h, mut served) = (ServerStream::default(), Swap::default(), 0);
        for chunk in stream.chunks(16 << 10) {
            let mut src = Ranges::new(chunk);
            assert_eq!(s.process(&mut src, &mut h), None, "forwarded as it is");
            served += src.served;
        }
        assert_eq!(h.subjects.len(), 16);
        assert!(
            served <= (16 << 10) + 16 * LINE_READ,
            "{served} of {} bytes read",
            stream.len()
        );
    }

    #[test]
    fn a_line_too_long_to_read_ends_the_stream() {
        let mut info = b"MSG a 1 2\r\nhi\r\nINFO {\"connect_urls\":[".to_vec();
        while info.len() <= MAX_SERVER_LINE {
            info.extend_from_slice(b"\"10.0.0.1:4222\",");
        }
        info.extend_from_slice(b"\"10.0.0.1:4222\"]}\r\nPING\r\n");
        for chunk in [4096, 65536, info.len()] {
            let mut h = Swap::default();
            let chunks: Vec<&[u8]> = info.chunks(chunk).collect();
            let out = feed(&chunks, &mut h);
            assert_eq!(out, b"MSG a 1 2\r\nhi\r\n", "chunks of {chunk}");
            assert_eq!(h.too_long, 1, "chunks of {chunk}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512), split in 0usize..512) {
            let at = split.min(data.len());
            let _ = feed(&[&data[..at], &data[at..]], &mut Swap::default());
        }
    }
}
