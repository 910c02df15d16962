//! Fetch requests and responses built in every version the filter parses, and walked cut
//! anywhere: what kafka/fetch.rs reports and edits.

use super::encode::{array_len, bytes, string};
use super::fetch::*;
use crate::edit::Editor;
/// Record batches of these sizes, one after another; a size given negative is a batch of
/// that many bytes cut short (to a third), as a broker ends a response filled to max_bytes.
pub(crate) fn batches(sizes: &[isize]) -> Vec<u8> {
    let mut out = Vec::new();
    for &n in sizes {
        let b = crate::kafka::produce::tests::batch(1, n.unsigned_abs());
        let keep = if n < 0 { b.len() / 3 } else { b.len() };
        out.extend_from_slice(&b[..keep]);
    }
    out
}

/// A Fetch request body of `version` asking `max` for each of `topics`' partitions.
pub(crate) fn fetch_request_body(version: i16, max: i32, topics: &[(&str, &[i32])]) -> Vec<u8> {
    let flexible = flexible_fetch(version);
    let mut b = Vec::new();
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&500i32.to_be_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&max.to_be_bytes());
    b.push(0);
    if version >= 7 {
        b.extend_from_slice(&[0; 8]);
    }
    array_len(&mut b, topics.len(), flexible);
    for (t, parts) in topics {
        string(&mut b, t.as_bytes(), flexible);
        array_len(&mut b, parts.len(), flexible);
        for p in *parts {
            b.extend_from_slice(&p.to_be_bytes());
            if version >= 9 {
                b.extend_from_slice(&0i32.to_be_bytes());
            }
            b.extend_from_slice(&0i64.to_be_bytes());
            if version >= 12 {
                b.extend_from_slice(&0i32.to_be_bytes());
            }
            if version >= 5 {
                b.extend_from_slice(&0i64.to_be_bytes());
            }
            b.extend_from_slice(&max.to_be_bytes());
            if flexible {
                b.push(0);
            }
        }
        if flexible {
            b.push(0);
        }
    }
    if version >= 7 {
        array_len(&mut b, 0, flexible);
    }
    if version >= 11 {
        string(&mut b, b"", flexible);
    }
    if flexible {
        b.push(0);
    }
    b
}

/// A Fetch response frame to `corr`: `topics` of (name, partitions of (index, records)).
pub(crate) fn fetch_response(
    version: i16,
    corr: i32,
    throttle: i32,
    topics: &[(&str, Vec<(i32, Vec<u8>)>)],
) -> Vec<u8> {
    let flexible = flexible_fetch(version);
    let mut b = Vec::new();
    b.extend_from_slice(&corr.to_be_bytes());
    if flexible {
        b.push(0);
    }
    b.extend_from_slice(&throttle.to_be_bytes());
    if version >= 7 {
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes());
    }
    array_len(&mut b, topics.len(), flexible);
    for (t, parts) in topics {
        string(&mut b, t.as_bytes(), flexible);
        array_len(&mut b, parts.len(), flexible);
        for (p, records) in parts {
            b.extend_from_slice(&p.to_be_bytes());
            b.extend_from_slice(&0i16.to_be_bytes());
            b.extend_from_slice(&[0; 16]);
            if version >= 5 {
                b.extend_from_slice(&[0; 8]);
            }
            // One aborted transaction, so the walk steps over the list.
            array_len(&mut b, 1, flexible);
            b.extend_from_slice(&[7; 16]);
            if flexible {
                b.push(0);
            }
            if version >= 11 {
                b.extend_from_slice(&(-1i32).to_be_bytes());
            }
            bytes(&mut b, records, flexible);
            if flexible {
                b.push(0);
            }
        }
        if flexible {
            b.push(0);
        }
    }
    if flexible {
        b.push(0);
    }
    let mut out = (b.len() as i32).to_be_bytes().to_vec();
    out.extend(b);
    out
}

#[test]
fn every_size_asked_is_clamped_and_no_other_byte_changes() {
    for version in MIN_FETCH_VERSION..=MAX_FETCH_VERSION {
        let body = fetch_request_body(version, 50 << 20, &[("orders", &[0, 1]), ("audit", &[3])]);
        let mut edit = Editor::default();
        let mut seen = Vec::new();
        fetch_topics(&body, version, |t| seen.push(t.to_vec())).unwrap_or_else(|| panic!("v{version} parses"));
        clamp_fetch(&body, version, 1 << 20, 0, body.len(), &mut edit).unwrap_or_else(|| panic!("v{version}"));
        assert_eq!(seen, [b"orders".to_vec(), b"audit".to_vec()]);
        let out = edit
            .finish(&mut crate::source::Whole(&body), body.len())
            .unwrap_or_default();
        assert_eq!(
            out,
            fetch_request_body(version, 1 << 20, &[("orders", &[0, 1]), ("audit", &[3])]),
            "v{version}"
        );
        let mut none = Editor::default();
        clamp_fetch(&body, version, 64 << 20, 0, body.len(), &mut none);
        assert!(none.is_empty(), "a size within the bound is left alone");
    }
}

#[derive(Default)]
struct Seen {
    head: Option<(usize, i32)>,
    records: Vec<(Vec<u8>, u64)>,
    done: Vec<bool>,
    raise: Option<i32>,
}

impl FetchHandler for Seen {
    fn head(&mut self, size: usize, throttle_ms: i32) -> Option<i32> {
        assert!(self.head.is_none(), "head reported once");
        self.head = Some((size, throttle_ms));
        self.raise
    }
    fn records(&mut self, topic: &[u8], bytes: u64) {
        self.records.push((topic.to_vec(), bytes));
    }
    fn done(&mut self, complete: bool) {
        self.done.push(complete);
    }
}

/// Walks `frame` cut at `cuts`, carrying what a step could not parse, as ResponseStream does.
fn walk_cut(frame: &[u8], version: i16, cuts: &[usize], h: &mut Seen) -> Vec<u8> {
    let mut w = FetchWalk::new(version, frame.len()).unwrap_or_else(|| panic!("v{version}"));
    let (mut carry, mut out) = (Vec::new(), Vec::new());
    let mut from = 0;
    for &to in cuts.iter().chain([&frame.len()]) {
        let mut data = std::mem::take(&mut carry);
        data.extend_from_slice(&frame[from..to]);
        from = to;
        let mut edit = Editor::default();
        let mut src = crate::source::Ranges::new(&data);
        let (stop, _) = w.walk(&mut src, 0, data.len(), data.len(), &mut edit, h);
        let edited = edit.finish(&mut src, data.len()).unwrap_or_else(|| data.clone());
        out.extend_from_slice(&edited[..stop]);
        carry = data[stop..].to_vec();
    }
    assert!(carry.is_empty(), "nothing left carried");
    out
}

#[test]
fn a_response_cut_anywhere_reports_each_partitions_whole_batches_once_and_passes_unchanged() {
    for version in MIN_FETCH_VERSION..=MAX_FETCH_VERSION {
        let frame = fetch_response(
            version,
            9,
            3,
            &[
                ("orders", vec![(0, batches(&[300, 100, -400])), (1, vec![])]),
                ("audit", vec![(2, batches(&[70]))]),
            ],
        );
        for a in 0..frame.len() {
            for b in [a, a + 1, a + 13, frame.len()] {
                let b = b.min(frame.len());
                let mut h = Seen::default();
                let out = walk_cut(&frame, version, &[a, b], &mut h);
                assert_eq!(out, frame, "v{version} cut at {a}, {b}");
                assert_eq!(h.head, Some((frame.len() - 4, 3)));
                assert_eq!(
                    h.records,
                    [
                        (b"orders".to_vec(), 400),
                        (b"orders".to_vec(), 0),
                        (b"audit".to_vec(), 70)
                    ],
                    "v{version} cut at {a}, {b}: whole batches counted, the cut one not"
                );
                assert_eq!(h.done, [true]);
            }
        }
    }
}

#[test]
fn the_throttle_is_raised_in_place_and_never_lowered() {
    for version in [MIN_FETCH_VERSION, 11, MAX_FETCH_VERSION] {
        let frame = fetch_response(version, 9, 40, &[("orders", vec![(0, batches(&[100]))])]);
        let mut h = Seen {
            raise: Some(250),
            ..Seen::default()
        };
        let out = walk_cut(&frame, version, &[3], &mut h);
        assert_eq!(
            out,
            fetch_response(version, 9, 250, &[("orders", vec![(0, batches(&[100]))])])
        );
        let mut lower = Seen {
            raise: Some(10),
            ..Seen::default()
        };
        assert_eq!(walk_cut(&frame, version, &[], &mut lower), frame);
    }
}

/// Walks a v12 `frame` arrived whole: the bytes fetched of it, and what was reported.
fn walk_whole(frame: &[u8]) -> (usize, Seen) {
    let mut w = FetchWalk::new(12, frame.len()).unwrap_or_else(|| panic!("v12"));
    let mut src = crate::source::Ranges::new(frame);
    let (mut edit, mut h) = (Editor::default(), Seen::default());
    assert_eq!(
        w.walk(&mut src, 0, frame.len(), frame.len(), &mut edit, &mut h),
        (frame.len(), true)
    );
    (src.served, h)
}

#[test]
fn the_records_are_never_fetched() {
    let frame = fetch_response(
        12,
        1,
        0,
        &[(
            "orders",
            vec![(0, batches(&[1 << 19, 1 << 19])), (1, batches(&[1 << 20]))],
        )],
    );
    let (served, h) = walk_whole(&frame);
    // The head, the topic, per partition its header and the tags after its records, and each
    // batch's offset and length.
    assert!(served <= 7 * HEADER_READ + 3 * BATCH_FRAMING, "{served} bytes fetched");
    assert_eq!(
        h.records,
        [(b"orders".to_vec(), 1 << 20), (b"orders".to_vec(), 1 << 20)]
    );
}

#[test]
fn batches_over_the_read_through_size_are_stepped_over_unread() {
    let sizes = [8 << 10; 64];
    let frame = fetch_response(12, 1, 0, &[("orders", vec![(0, batches(&sizes))])]);
    let (served, h) = walk_whole(&frame);
    assert!(served <= 5 * HEADER_READ + 64 * BATCH_FRAMING, "{served} bytes fetched");
    assert_eq!(h.records, [(b"orders".to_vec(), 64 * (8 << 10))]);
}

#[test]
fn a_response_that_does_not_parse_passes_and_says_so() {
    let mut frame = fetch_response(12, 1, 0, &[("orders", vec![(0, batches(&[40]))])]);
    // The partition count claims more partitions than follow.
    let at = frame.iter().position(|&b| b == b'o').unwrap_or(0) + 6;
    frame[at] = 9;
    let mut h = Seen::default();
    assert_eq!(walk_cut(&frame, 12, &[], &mut h), frame);
    assert_eq!(h.done, [false]);
}
