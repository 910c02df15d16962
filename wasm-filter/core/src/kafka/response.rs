//! Broker → client: responses are framed like requests and start with the correlation id of
//! the request they answer. The scanner streams every response through except those the filter
//! asked to see whole (it keeps at most `MAX_WHOLE` bytes of one), which it can then replace.

use super::cursor::Cursor;
use super::fetch::{FetchHandler, FetchWalk, API_FETCH, MAX_FETCH_VERSION};
use super::produce::MAX_PRODUCE_VERSION;
use super::FIRST_FLEXIBLE_PRODUCE;
use crate::edit::{scan_carried, Editor};
use crate::source::{ahead_after, Source};

/// A response's size and correlation id.
const RESPONSE_HEAD: usize = 8;
/// What is fetched with them after a large response: a Produce or ApiVersions response whole.
const RESPONSE_AHEAD: usize = 512;

/// The largest response the filter reads whole (Produce and ApiVersions answers are far smaller).
pub const MAX_WHOLE: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interest {
    /// Stream it through untouched.
    Pass,
    /// Collect it whole and hand it to [`ResponseHandler::response`].
    Whole,
    /// A Fetch response of this version: walk it as it streams by, reporting its records to
    /// the handler's fetch methods.
    Fetch(i16),
}

pub trait ResponseHandler {
    /// A response to `correlation_id` starts; the handler may release what awaited it.
    fn arriving(&mut self, correlation_id: i32, size: usize) -> Interest;
    /// The whole response frame (size prefix included); Some replaces it.
    fn response(&mut self, correlation_id: i32, frame: &[u8]) -> Option<Vec<u8>>;
    /// A walked Fetch response's head (see [`FetchHandler::head`]).
    fn fetch_head(&mut self, _size: usize, _throttle_ms: i32) -> Option<i32> {
        None
    }
    /// One partition's record bytes in the walked Fetch response.
    fn fetch_records(&mut self, _topic: &[u8], _bytes: u64) {}
    /// The walked Fetch response is over (see [`FetchHandler::done`]).
    fn fetch_done(&mut self, _complete: bool) {}
}

/// A response handler seen as the walk's.
struct Walked<'h, H>(&'h mut H);

impl<H: ResponseHandler> FetchHandler for Walked<'_, H> {
    fn head(&mut self, size: usize, throttle_ms: i32) -> Option<i32> {
        self.0.fetch_head(size, throttle_ms)
    }
    fn records(&mut self, topic: &[u8], bytes: u64) {
        self.0.fetch_records(topic, bytes);
    }
    fn done(&mut self, complete: bool) {
        self.0.fetch_done(complete);
    }
}

#[derive(Debug, Default)]
pub struct ResponseStream {
    carry: Vec<u8>,
    pass_left: usize,
    /// A size too small for a correlation id: the stream no longer frames, so the rest is
    /// forwarded as it is (the client closes on it) and no response is attributed from it.
    unframed: bool,
    /// The size of the last response (see crate::source::ahead_after).
    last_size: usize,
    /// The Fetch response being walked.
    walk: Option<FetchWalk>,
}

/// A response's size counts its correlation id at least.
const MIN_RESPONSE_SIZE: i32 = 4;

impl ResponseStream {
    /// Scans one read from the broker; returns the bytes to forward instead, if they differ.
    pub fn process(&mut self, src: &mut dyn Source, handler: &mut impl ResponseHandler) -> Option<Vec<u8>> {
        if self.unframed {
            return None;
        }
        let ResponseStream {
            carry,
            pass_left,
            unframed,
            last_size,
            walk,
        } = self;
        scan_carried(carry, src, |data| {
            let len = data.len();
            let mut edit = Editor::default();
            let mut pos = 0;
            loop {
                if let Some(w) = walk {
                    let (stop, finished) = w.walk(data, pos, len, len, &mut edit, &mut Walked(handler));
                    if !finished {
                        return (edit, stop);
                    }
                    *walk = None;
                    pos = stop;
                }
                if *pass_left > 0 {
                    let n = (*pass_left).min(len - pos);
                    pos += n;
                    *pass_left -= n;
                    if *pass_left > 0 {
                        break;
                    }
                }
                if pos >= len {
                    break;
                }
                // Only the size and correlation id of a response that passes are read (fetched
                // with more, see crate::source::ahead_after).
                let head = data.fetch(pos, RESPONSE_HEAD, ahead_after(*last_size, RESPONSE_AHEAD));
                let (Some(size), Some(corr)) = (be_i32(head, 0), be_i32(head, 4)) else {
                    return (edit, pos);
                };
                if size < MIN_RESPONSE_SIZE {
                    *unframed = true;
                    break;
                }
                let total = 4 + usize::try_from(size).unwrap_or(0);
                *last_size = total;
                match handler.arriving(corr, total - 4) {
                    Interest::Whole if total <= MAX_WHOLE => {
                        if len - pos < total {
                            return (edit, pos);
                        }
                        let frame = data.at(pos, total).get(..total).unwrap_or_default();
                        if let Some(with) = handler.response(corr, frame) {
                            edit.replace(len, pos, pos + total, &with);
                        }
                        pos += total;
                    }
                    Interest::Fetch(version) if FetchWalk::new(version, total).is_some() => {
                        *walk = FetchWalk::new(version, total);
                    }
                    _ => {
                        let n = total.min(len - pos);
                        pos += n;
                        *pass_left = total - n;
                    }
                }
            }
            (edit, len)
        })
    }
}

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map(i32::from_be_bytes)
}

/// Raises a Produce response's throttle_time_ms to at least `throttle_ms`, in place.
pub fn raise_produce_throttle(frame: &mut [u8], version: i16, throttle_ms: i32) -> Option<()> {
    let at = produce_throttle_offset(frame, version)?;
    let current = be_i32(frame, at)?;
    frame
        .get_mut(at..at + 4)?
        .copy_from_slice(&current.max(throttle_ms).to_be_bytes());
    Some(())
}

/// Where throttle_time_ms sits in a Produce response frame (after the topic array).
pub(super) fn produce_throttle_offset(frame: &[u8], version: i16) -> Option<usize> {
    let flexible = version >= FIRST_FLEXIBLE_PRODUCE;
    let mut c = Cursor::new(frame);
    c.i32()?; // size
    c.i32()?; // correlation id
    if flexible {
        c.skip_tagged_fields()?;
    }
    let topics = c.array_len(flexible)?;
    for _ in 0..topics {
        c.string_field(flexible)?;
        let partitions = c.array_len(flexible)?;
        for _ in 0..partitions {
            c.bytes(4 + 2 + 8 + 8)?; // index, error, base offset, log append time
            if version >= 5 {
                c.bytes(8)?; // log start offset
            }
            if version >= 8 {
                let record_errors = c.array_len(flexible)?;
                for _ in 0..record_errors {
                    c.i32()?;
                    c.string_field(flexible)?;
                    if flexible {
                        c.skip_tagged_fields()?;
                    }
                }
                c.string_field(flexible)?;
            }
            if flexible {
                c.skip_tagged_fields()?;
            }
        }
        if flexible {
            c.skip_tagged_fields()?;
        }
    }
    Some(c.position())
}

/// Lowers the max versions an ApiVersions response advertises to what the filter parses, in
/// place: Produce's and Fetch's, and the admin requests' it answers refusals of
/// (crate::kafka::authz). Every entry's, should a broker list one twice: a client may read
/// either.
pub fn cap_versions(frame: &mut [u8], api_versions_version: i16) -> Option<()> {
    let flexible = api_versions_version >= 3;
    let mut capped_at = Vec::new();
    let mut c = Cursor::new(frame);
    c.i32()?; // size
    c.i32()?; // correlation id (ApiVersions responses always use header v0)
    c.i16()?; // error code
    let n = c.array_len(flexible)?;
    for _ in 0..n {
        let key = c.i16()?;
        c.i16()?; // min
        let at = c.position();
        let advertised = c.i16()?;
        if flexible {
            c.skip_tagged_fields()?;
        }
        let max = match key {
            super::API_PRODUCE => MAX_PRODUCE_VERSION,
            API_FETCH => MAX_FETCH_VERSION,
            _ => match super::authz::api_of(key).and_then(|a| a.max_version) {
                Some(max) => max,
                None => continue,
            },
        };
        if advertised > max {
            capped_at.push((at, max));
        }
    }
    for (at, max) in capped_at {
        frame.get_mut(at..at + 2)?.copy_from_slice(&max.to_be_bytes());
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::encode::{produce_response, PartitionError, THROTTLING_QUOTA_EXCEEDED};
    use crate::source::Ranges;

    #[test]
    fn a_synthesised_response_can_have_its_throttle_found_in_every_version() {
        for v in 3..=12 {
            let topics = vec![(
                b"orders".to_vec(),
                vec![
                    PartitionError {
                        partition: 0,
                        error: THROTTLING_QUOTA_EXCEEDED,
                    },
                    PartitionError {
                        partition: 3,
                        error: 10,
                    },
                ],
            )];
            let mut frame = produce_response(v, 42, &topics, 5, Some(b"why"));
            let size = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
            assert_eq!(size + 4, frame.len(), "v{v}");
            assert_eq!(
                produce_throttle_offset(&frame, v).map(|o| be_i32(&frame, o)),
                Some(Some(5)),
                "v{v}"
            );
            raise_produce_throttle(&mut frame, v, 250).unwrap();
            assert_eq!(be_i32(&frame, produce_throttle_offset(&frame, v).unwrap()), Some(250));
            raise_produce_throttle(&mut frame, v, 10).unwrap();
            assert_eq!(
                be_i32(&frame, produce_throttle_offset(&frame, v).unwrap()),
                Some(250),
                "never lowered"
            );
        }
    }

    fn api_versions_response(version: i16, entries: &[(i16, i16, i16)]) -> Vec<u8> {
        let flexible = version >= 3;
        let mut b = 7i32.to_be_bytes().to_vec();
        b.extend_from_slice(&0i16.to_be_bytes());
        if flexible {
            b.push(entries.len() as u8 + 1);
        } else {
            b.extend_from_slice(&(entries.len() as i32).to_be_bytes());
        }
        for (k, lo, hi) in entries {
            b.extend_from_slice(&k.to_be_bytes());
            b.extend_from_slice(&lo.to_be_bytes());
            b.extend_from_slice(&hi.to_be_bytes());
            if flexible {
                b.push(0);
            }
        }
        if version >= 1 {
            b.extend_from_slice(&0i32.to_be_bytes());
        }
        if flexible {
            b.push(0);
        }
        let mut f = (b.len() as i32).to_be_bytes().to_vec();
        f.extend(b);
        f
    }

    #[test]
    fn caps_the_advertised_produce_and_fetch_versions() {
        for v in [0, 2, 3, 4] {
            let mut f = api_versions_response(v, &[(0, 3, 13), (1, 4, 17), (18, 0, 4)]);
            cap_versions(&mut f, v).unwrap();
            assert_eq!(
                f,
                api_versions_response(v, &[(0, 3, 12), (1, 4, 12), (18, 0, 4)]),
                "v{v}"
            );
        }
    }

    /// Found by fuzzing (seeds/kafka_responses/api-versions-two-produce-entries): only the last
    /// of two Produce entries was capped.
    #[test]
    fn caps_every_produce_entry() {
        let mut f = api_versions_response(3, &[(0, 3, 13), (18, 0, 4), (0, 3, 14)]);
        cap_versions(&mut f, 3).unwrap();
        assert_eq!(f, api_versions_response(3, &[(0, 3, 12), (18, 0, 4), (0, 3, 12)]));
    }

    struct Swap;
    impl ResponseHandler for Swap {
        fn arriving(&mut self, corr: i32, _size: usize) -> Interest {
            if corr == 2 {
                Interest::Whole
            } else {
                Interest::Pass
            }
        }
        fn response(&mut self, _corr: i32, _frame: &[u8]) -> Option<Vec<u8>> {
            Some(b"\0\0\0\x04\0\0\0\x02".to_vec())
        }
    }

    fn frame(corr: i32, body: &[u8]) -> Vec<u8> {
        let mut f = ((body.len() + 4) as i32).to_be_bytes().to_vec();
        f.extend_from_slice(&corr.to_be_bytes());
        f.extend_from_slice(body);
        f
    }

    /// Found by fuzzing (seeds/kafka_responses/negative-size): a size of -1 made a 4-byte
    /// "frame" of the size alone, handed over whole with the correlation id of what followed.
    #[test]
    fn a_size_without_room_for_a_correlation_id_ends_framing() {
        for size in [-1i32, 0, 3] {
            let mut bad = size.to_be_bytes().to_vec();
            bad.extend_from_slice(&2i32.to_be_bytes());
            let stream = [frame(2, &[8; 20]), bad, frame(2, &[8; 20])].concat();
            let want = [b"\0\0\0\x04\0\0\0\x02".as_slice(), &stream[28..]].concat();
            for at in 0..=stream.len() {
                let mut s = ResponseStream::default();
                let mut out = Vec::new();
                for part in [&stream[..at], &stream[at..], b"more"] {
                    match s.process(&mut Ranges::new(part), &mut Swap) {
                        Some(r) => out.extend(r),
                        None => out.extend_from_slice(part),
                    }
                }
                assert_eq!(out, [want.as_slice(), b"more"].concat(), "size {size}, split at {at}");
            }
        }
    }

    #[test]
    fn replaces_only_the_responses_it_asked_for_at_any_split() {
        let stream = [frame(1, &[7; 30]), frame(2, &[8; 20]), frame(3, &[9; 5])].concat();
        let want = [frame(1, &[7; 30]), b"\0\0\0\x04\0\0\0\x02".to_vec(), frame(3, &[9; 5])].concat();
        for at in 0..=stream.len() {
            let mut s = ResponseStream::default();
            let mut out = Vec::new();
            for part in [&stream[..at], &stream[at..]] {
                match s.process(&mut Ranges::new(part), &mut Swap) {
                    Some(r) => out.extend(r),
                    None => out.extend_from_slice(part),
                }
            }
            assert_eq!(out, want, "split at {at}");
        }
    }

    /// Fetch responses walked among others: each partition's records reported once, the
    /// throttle raised in place, every other byte as the broker sent it, at any two cuts.
    #[test]
    fn fetch_responses_are_walked_in_stream_at_any_cuts() {
        use crate::kafka::fetch_tests::{batches, fetch_response};

        #[derive(Default)]
        struct Fetches {
            records: Vec<(Vec<u8>, u64)>,
            heads: usize,
            done: Vec<bool>,
        }
        impl ResponseHandler for Fetches {
            fn arriving(&mut self, corr: i32, _size: usize) -> Interest {
                if corr % 2 == 0 {
                    Interest::Fetch(if corr == 2 { 11 } else { 12 })
                } else {
                    Interest::Pass
                }
            }
            fn response(&mut self, _corr: i32, _frame: &[u8]) -> Option<Vec<u8>> {
                None
            }
            fn fetch_head(&mut self, _size: usize, _throttle_ms: i32) -> Option<i32> {
                self.heads += 1;
                Some(700)
            }
            fn fetch_records(&mut self, topic: &[u8], bytes: u64) {
                self.records.push((topic.to_vec(), bytes));
            }
            fn fetch_done(&mut self, complete: bool) {
                self.done.push(complete);
            }
        }
        let topics = |n: isize| vec![("orders", vec![(0, batches(&[90 + n])), (1, batches(&[63, -80]))])];
        let stream = [
            frame(1, &[7; 30]),
            fetch_response(11, 2, 0, &topics(1)),
            fetch_response(12, 4, 0, &topics(2)),
            frame(5, &[9; 5]),
        ]
        .concat();
        let want = [
            frame(1, &[7; 30]),
            fetch_response(11, 2, 700, &topics(1)),
            fetch_response(12, 4, 700, &topics(2)),
            frame(5, &[9; 5]),
        ]
        .concat();
        for a in 0..=stream.len() {
            for b in [a, a + 1, a + 7, a + 40, stream.len()].map(|b| b.min(stream.len())) {
                let (mut s, mut h, mut out) = (ResponseStream::default(), Fetches::default(), Vec::new());
                for part in [&stream[..a], &stream[a..b], &stream[b..]] {
                    match s.process(&mut Ranges::new(part), &mut h) {
                        Some(r) => out.extend(r),
                        None => out.extend_from_slice(part),
                    }
                }
                assert_eq!(out, want, "cut at {a}, {b}");
                assert_eq!(h.heads, 2);
                assert_eq!(
                    h.records.iter().map(|r| r.1).collect::<Vec<_>>(),
                    [91, 63, 92, 63],
                    "cut at {a}, {b}"
                );
                assert_eq!(h.done, [true, true]);
            }
        }
    }
}
