//! Walks a client connection's Kafka requests frame by frame, with the same buffer semantics as
//! the NATS scanner: forwarded bytes are gone, held bytes are presented again with new ones.
//! Frames whose body the filter must read (Produce, SaslHandshake, SaslAuthenticate, and the
//! admin requests decided per resource: crate::kafka::authz) are held until complete, up to
//! `hold_limit`; every other frame is passed through after its header, without buffering. A
//! request the handler answers with Admission::Close closes the connection.

use super::authz;
use super::cursor::Cursor;
use super::fetch::{clamp_fetch, fetch_parsed, flexible_fetch, API_FETCH};
use super::produce::{visit_produce, ProduceError};
use super::sasl::{API_SASL_AUTHENTICATE, API_SASL_HANDSHAKE};
use super::API_PRODUCE;
use crate::edit::Editor;
use crate::scan::{Admission, Outcome};
use crate::source::{ahead_after, Source, Window};

/// Kafka brokers refuse requests above socket.request.max.bytes (100 MiB by default) by closing
/// the connection; the filter does the same rather than stream an absurd frame.
pub const MAX_REQUEST_BYTES: usize = 100 << 20;

/// A request header (api key, version, correlation id, client id of at most 32 KiB, tagged
/// fields) never needs more; one that does is refused rather than buffered.
pub const MAX_HEADER_BYTES: usize = 64 << 10;

/// What is read of a frame first: its size and a header with a client id of ordinary length.
const HEADER_READ: usize = 256;

/// Why a connection closes when the handler refuses a request outright (Admission::Close): the
/// handler logs the particulars.
const REFUSED: &str = "a request the gateway does not pass";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader<'a> {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<&'a [u8]>,
    /// Frame size, excluding the 4-byte length prefix.
    pub size: usize,
}

pub trait RequestHandler {
    /// Called once per request (again after it was held). `body` (the bytes after the request
    /// header, read by range) is present for SaslHandshake and SaslAuthenticate requests that
    /// are all here, and for Produce requests whose every header is here (their records may
    /// still be arriving), within the hold limit; only those may be held or replaced.
    fn request(&mut self, header: &RequestHeader<'_>, body: Option<&mut dyn Source>) -> Admission;

    /// The most a forwarded Fetch request may ask for (its max_bytes and each
    /// partition_max_bytes are lowered to it); None: what it asks.
    fn fetch_most(&self) -> Option<i32> {
        None
    }

    /// True while the gateway owes the client more than it may (crate::backlog): the next
    /// request, whatever it is, is held until that changes. `at`: where the request starts in
    /// the input; `rest`: the bytes of the input from it on.
    fn backlogged(&self, _at: usize, _rest: usize) -> bool {
        false
    }
}

#[derive(Debug)]
pub struct RequestStream {
    consumed: usize,
    skip_left: usize,
    /// The bytes skipped are those of a request that was replaced: they are dropped.
    dropping: bool,
    hold_limit: usize,
    /// The client id of the request being decided, copied out of Envoy's buffer (reused).
    client_id: Vec<u8>,
    /// A Produce's topic names while its headers are walked (reused).
    topic: Vec<u8>,
    /// The size of the last request: what to fetch at the next header depends on it (see
    /// crate::source::ahead_after).
    last_size: usize,
}

impl RequestStream {
    pub fn new(hold_limit: usize) -> Self {
        RequestStream {
            consumed: 0,
            skip_left: 0,
            dropping: false,
            hold_limit,
            client_id: Vec::new(),
            topic: Vec::new(),
            last_size: 0,
        }
    }

    /// Scans what Envoy presents; Err is a reason to close the connection (as a broker would).
    pub fn process(
        &mut self,
        src: &mut dyn Source,
        handler: &mut impl RequestHandler,
    ) -> Result<Outcome, &'static str> {
        let len = src.len();
        let mut edit = Editor::default();
        let mut pos = self.consumed.min(len);
        loop {
            if self.skip_left > 0 {
                let n = self.skip_left.min(len - pos);
                if self.dropping {
                    edit.replace(len, pos, pos + n, &[]);
                }
                pos += n;
                self.skip_left -= n;
                if self.skip_left > 0 {
                    break;
                }
            }
            if pos >= len {
                break;
            }
            let framed = match handler.backlogged(pos, len - pos) {
                true => Frame::Held,
                false => self.frame(src, pos, handler, &mut edit),
            };
            match framed {
                Frame::Incomplete | Frame::Held => {
                    self.consumed = edit.output_offset(pos);
                    let decided = self.consumed;
                    return Ok(Outcome {
                        hold: true,
                        replace: edit.finish(src, len),
                        decided,
                    });
                }
                Frame::Bad(why) => return Err(why),
                Frame::Done { total, replace } => {
                    self.dropping = replace.is_some();
                    if let Some(with) = replace {
                        edit.replace(len, pos, pos + total, &with);
                    }
                    let available = (len - pos).min(total);
                    pos += available;
                    self.skip_left = total - available;
                }
            }
        }
        self.consumed = 0;
        Ok(Outcome {
            hold: false,
            replace: edit.finish(src, len),
            decided: 0,
        })
    }

    /// The client id of the latest request (empty: none yet, or it sent none).
    pub fn client_id(&self) -> &[u8] {
        &self.client_id
    }

    /// The first `n` bytes of a held buffer were forwarded: the next buffer starts after them.
    pub fn forwarded(&mut self, n: usize) {
        self.consumed = self.consumed.saturating_sub(n);
    }

    /// The frame at `pos`: its size and header are read by range, and its body only as far as
    /// the handler reads it.
    fn frame(
        &mut self,
        src: &mut dyn Source,
        pos: usize,
        handler: &mut impl RequestHandler,
        edit: &mut Editor,
    ) -> Frame {
        let len = src.len();
        let available = len - pos;
        let ahead = ahead_after(self.last_size, HEADER_READ);
        let Some(size) = src.fetch(pos, 4, ahead).get(..4).map(|b| [b[0], b[1], b[2], b[3]]) else {
            return Frame::Incomplete;
        };
        let Ok(size) = usize::try_from(i32::from_be_bytes(size)) else {
            return Frame::Bad("negative request size");
        };
        if size > MAX_REQUEST_BYTES {
            return Frame::Bad("request larger than socket.request.max.bytes");
        }
        let total = 4 + size;
        self.last_size = total;
        let (header, header_len) = {
            // A client id longer than the first read: read up to the header's limit.
            let head = match src.fetch(pos, 4, ahead) {
                h if matches!(parse_header(frame_of(h, total), size), HeaderParse::Incomplete) => {
                    src.at(pos, 4 + size.min(MAX_HEADER_BYTES))
                }
                _ => src.fetch(pos, 4, ahead),
            };
            let frame = frame_of(head, total);
            match parse_header(frame, size) {
                HeaderParse::Ok(h, l) => {
                    self.client_id.clear();
                    if let Some(id) = h.client_id {
                        self.client_id.extend_from_slice(id);
                    }
                    (Owned::from(&h), l)
                }
                HeaderParse::Incomplete if frame.len() < size.min(MAX_HEADER_BYTES) => return Frame::Incomplete,
                HeaderParse::Incomplete | HeaderParse::Bad => return Frame::Bad("malformed request header"),
            }
        };
        let header = header.with_client_id(&self.client_id);
        let reads_body = match header.api_key {
            API_PRODUCE => total <= self.hold_limit,
            // A Fetch is read when its sizes may be clamped: the versions parsed.
            API_FETCH => total <= self.hold_limit && fetch_parsed(header.api_version),
            API_SASL_HANDSHAKE | API_SASL_AUTHENTICATE => total <= self.hold_limit,
            key => authz::reads_body(key) && total <= self.hold_limit,
        };
        if !reads_body {
            if let Admission::Close(_) = handler.request(&header, None) {
                return Frame::Bad(REFUSED);
            }
            return Frame::Done { total, replace: None };
        }
        let body_at = pos + 4 + header_len;
        let mut body = Window::new(src, body_at, total - 4 - header_len);
        let ready = match header.api_key {
            // Decided on its headers: the records need not have arrived.
            API_PRODUCE => {
                available >= total
                    || visit_produce(&mut body, header.api_version, &mut self.topic, |_| {})
                        != Err(ProduceError::NotYet)
            }
            _ => available >= total,
        };
        if !ready {
            return Frame::Incomplete;
        }
        match handler.request(&header, Some(&mut body)) {
            Admission::Hold => Frame::Held,
            Admission::Forward if header.api_key == API_FETCH => {
                if let Some(most) = handler.fetch_most() {
                    clamp_fetch(body.all(), header.api_version, most, body_at, len, edit);
                }
                Frame::Done { total, replace: None }
            }
            Admission::Replace(with) => Frame::Done {
                total,
                replace: Some(with),
            },
            Admission::Close(_) => Frame::Bad(REFUSED),
            Admission::Forward => Frame::Done { total, replace: None },
        }
    }
}

/// The frame's bytes in `head` (after its size), at most `total` from its start.
fn frame_of(head: &[u8], total: usize) -> &[u8] {
    head.get(4..total.min(head.len())).unwrap_or_default()
}

/// A parsed header without its client id, which is copied out of Envoy's buffer so the body
/// can be read by range while the header is in use.
struct Owned {
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    has_client_id: bool,
    size: usize,
}

impl Owned {
    fn from(h: &RequestHeader<'_>) -> Self {
        Owned {
            api_key: h.api_key,
            api_version: h.api_version,
            correlation_id: h.correlation_id,
            has_client_id: h.client_id.is_some(),
            size: h.size,
        }
    }

    fn with_client_id(self, id: &[u8]) -> RequestHeader<'_> {
        RequestHeader {
            api_key: self.api_key,
            api_version: self.api_version,
            correlation_id: self.correlation_id,
            client_id: self.has_client_id.then_some(id),
            size: self.size,
        }
    }
}

enum Frame {
    Incomplete,
    /// The handler holds this request: stop here and present it again later.
    Held,
    Bad(&'static str),
    Done {
        total: usize,
        replace: Option<Vec<u8>>,
    },
}

enum HeaderParse<'a> {
    Ok(RequestHeader<'a>, usize),
    Incomplete,
    Bad,
}

/// Request header v1 (api key, version, correlation id, client id) plus, for the flexible
/// versions of the requests whose body is read, v2's tagged fields.
fn parse_header(frame: &[u8], size: usize) -> HeaderParse<'_> {
    let mut c = Cursor::new(frame);
    let (Some(api_key), Some(api_version), Some(correlation_id), Some(client_id)) =
        (c.i16(), c.i16(), c.i32(), c.nullable_string())
    else {
        return HeaderParse::Incomplete;
    };
    if api_key < 0 || api_version < 0 {
        return HeaderParse::Bad;
    }
    let flexible = match api_key {
        API_PRODUCE => api_version >= 9,
        API_FETCH => fetch_parsed(api_version) && flexible_fetch(api_version),
        API_SASL_AUTHENTICATE => api_version >= 2,
        // The admin requests the filter reads: their body begins after the tagged fields.
        key => authz::api_of(key).is_some_and(|a| a.flexible(api_version)),
    };
    if flexible && c.skip_tagged_fields().is_none() {
        return HeaderParse::Incomplete;
    }
    if c.position() > size {
        return HeaderParse::Bad;
    }
    HeaderParse::Ok(
        RequestHeader {
            api_key,
            api_version,
            correlation_id,
            client_id,
            size,
        },
        c.position(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::produce::tests::{batch, produce_body};
    use crate::source::Ranges;
    use proptest::prelude::*;

    fn request(api_key: i16, version: i16, corr: i32, client_id: &str, body: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&api_key.to_be_bytes());
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&corr.to_be_bytes());
        f.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
        f.extend_from_slice(client_id.as_bytes());
        if (api_key == API_PRODUCE && version >= 9)
            || (api_key == API_SASL_AUTHENTICATE && version >= 2)
            || authz::api_of(api_key).is_some_and(|a| a.flexible(version))
        {
            f.push(0);
        }
        f.extend_from_slice(body);
        let mut out = (f.len() as i32).to_be_bytes().to_vec();
        out.extend(f);
        out
    }

    #[derive(Default)]
    struct Recorder {
        seen: Vec<(i16, i32, Option<Vec<u8>>, Option<usize>)>,
        replace_produce: Option<Vec<u8>>,
    }

    impl RequestHandler for Recorder {
        fn request(&mut self, h: &RequestHeader<'_>, body: Option<&mut dyn Source>) -> Admission {
            self.seen.push((
                h.api_key,
                h.correlation_id,
                h.client_id.map(<[u8]>::to_vec),
                body.map(|b| b.len()),
            ));
            if h.api_key == API_PRODUCE {
                if let Some(with) = self.replace_produce.take() {
                    return Admission::Replace(with);
                }
            }
            Admission::Forward
        }
    }

    fn feed(s: &mut RequestStream, chunks: &[&[u8]], h: &mut Recorder) -> (Vec<u8>, Option<&'static str>) {
        let mut held = Vec::new();
        let mut fwd = Vec::new();
        for c in chunks {
            held.extend_from_slice(c);
            match s.process(&mut Ranges::new(&held), h) {
                Ok(o) => {
                    if let Some(r) = o.replace {
                        held = r;
                    }
                    if !o.hold {
                        fwd.append(&mut held);
                    }
                }
                Err(why) => return (fwd, Some(why)),
            }
        }
        (fwd, None)
    }

    fn sample() -> (Vec<u8>, Vec<(i16, i32, Option<Vec<u8>>, Option<usize>)>) {
        let produce = produce_body(9, "orders", 1, &[(0, batch(2, 90))]);
        let mut s = request(18, 3, 1, "acme-1", &[0, 0, 0]);
        s.extend(request(3, 12, 2, "acme-1", &[1, 2, 3, 4]));
        s.extend(request(API_PRODUCE, 9, 3, "acme-1", &produce));
        s.extend(request(1, 13, 4, "acme-1", &[9; 40]));
        let want = vec![
            (18, 1, Some(b"acme-1".to_vec()), None),
            (3, 2, Some(b"acme-1".to_vec()), Some(4)), // Metadata: read whole (authz)
            (API_PRODUCE, 3, Some(b"acme-1".to_vec()), Some(produce.len())),
            (1, 4, Some(b"acme-1".to_vec()), None),
        ];
        (s, want)
    }

    /// A flexible admin request's header ends with tagged fields: its body, the resources the
    /// filter decides on, begins after them (read from the header's end, it would start with
    /// the tags' 0, a DeleteTopics of no topic).
    #[test]
    fn an_admin_request_is_read_whole_from_after_its_headers_tagged_fields() {
        let body = [2u8, 2, b'x', 0, 0, 0x75, 0x30, 0]; // one topic "x", timeout, no tags
        for (version, flexible) in [(3i16, false), (4, true), (5, true)] {
            let frame = request(20, version, 9, "acme-admin", &body);
            let mut h = Recorder {
                seen: Vec::new(),
                replace_produce: None,
            };
            let (fwd, err) = feed(&mut RequestStream::new(1 << 20), &[&frame], &mut h);
            assert_eq!((err, fwd.len()), (None, frame.len()));
            assert_eq!(
                h.seen[0].3,
                Some(body.len()),
                "v{version} (flexible: {flexible}): the body alone"
            );
        }
    }

    #[test]
    fn a_request_the_handler_closes_on_ends_the_stream() {
        struct Closer;
        impl RequestHandler for Closer {
            fn request(&mut self, _: &RequestHeader<'_>, _: Option<&mut dyn Source>) -> Admission {
                Admission::Close(Vec::new())
            }
        }
        for key in [20i16, 27] {
            let frame = request(key, 1, 1, "c", &[0, 0, 0, 0, 0, 0, 0, 0]);
            let result = RequestStream::new(1 << 20).process(&mut Ranges::new(&frame), &mut Closer);
            assert_eq!(result.err(), Some(REFUSED), "key {key}");
        }
    }

    #[test]
    fn every_split_point_yields_each_request_once() {
        let (stream, want) = sample();
        for at in 0..=stream.len() {
            let mut h = Recorder::default();
            let (fwd, err) = feed(
                &mut RequestStream::new(1 << 20),
                &[&stream[..at], &stream[at..]],
                &mut h,
            );
            assert_eq!(err, None, "split at {at}");
            assert_eq!(fwd, stream, "split at {at}");
            assert_eq!(h.seen, want, "split at {at}");
        }
    }

    #[test]
    fn a_replaced_produce_is_swapped_whole_and_the_rest_flows_at_any_split() {
        let (stream, _) = sample();
        let produce_start =
            request(18, 3, 1, "acme-1", &[0, 0, 0]).len() + request(3, 12, 2, "acme-1", &[1, 2, 3, 4]).len();
        let produce_len = request(
            API_PRODUCE,
            9,
            3,
            "acme-1",
            &produce_body(9, "orders", 1, &[(0, batch(2, 90))]),
        )
        .len();
        let mut want = stream[..produce_start].to_vec();
        want.extend_from_slice(b"SWAPPED");
        want.extend_from_slice(&stream[produce_start + produce_len..]);
        for at in 0..=stream.len() {
            let mut h = Recorder {
                replace_produce: Some(b"SWAPPED".to_vec()),
                ..Recorder::default()
            };
            let (fwd, err) = feed(
                &mut RequestStream::new(1 << 20),
                &[&stream[..at], &stream[at..]],
                &mut h,
            );
            assert_eq!(err, None);
            assert_eq!(fwd, want, "split at {at}");
        }
    }

    #[test]
    fn the_records_of_large_produces_are_never_fetched() {
        let mut stream = Vec::new();
        for corr in 0..8 {
            let body = produce_body(9, "orders", 1, &[(0, batch(1000, 100_000))]);
            stream.extend(request(API_PRODUCE, 9, corr, "acme-1", &body));
        }
        let (mut s, mut h, mut held, mut served) = (RequestStream::new(1 << 20), Recorder::default(), Vec::new(), 0);
        for chunk in stream.chunks(16 << 10) {
            held.extend_from_slice(chunk);
            let mut src = Ranges::new(&held);
            let Ok(o) = s.process(&mut src, &mut h) else {
                panic!("closed")
            };
            served += src.served;
            assert_eq!(o.replace, None, "nothing edited");
            if !o.hold {
                held.clear();
            }
        }
        assert_eq!(h.seen.len(), 8, "each request decided once, on its headers");
        // The first read is read through (nothing is known of the sizes yet); after it, a
        // request's headers each.
        assert!(
            served <= (16 << 10) + 8 * 2 * HEADER_READ,
            "{served} of {} bytes fetched",
            stream.len()
        );
    }

    #[test]
    fn produce_over_the_hold_limit_streams_without_a_body() {
        let (stream, _) = sample();
        let mut h = Recorder::default();
        let (fwd, _) = feed(&mut RequestStream::new(64), &[&stream], &mut h);
        assert_eq!(fwd, stream);
        assert_eq!(h.seen[2].3, None);
    }

    #[test]
    fn hostile_sizes_close_instead_of_buffering() {
        let mut h = Recorder::default();
        let huge = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        assert_eq!(
            feed(&mut RequestStream::new(1 << 20), &[&huge], &mut h).1,
            Some("request larger than socket.request.max.bytes")
        );
        let negative = [0xff, 0xff, 0xff, 0xff];
        assert_eq!(
            feed(&mut RequestStream::new(1 << 20), &[&negative], &mut h).1,
            Some("negative request size")
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600), split in 0usize..600) {
            let mut h = Recorder::default();
            let at = split.min(data.len());
            let _ = feed(&mut RequestStream::new(256), &[&data[..at], &data[at..]], &mut h);
        }
    }
}
