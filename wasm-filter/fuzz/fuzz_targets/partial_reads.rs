//! The scanners read Envoy's buffer by range (weighstation_core::source): headers only, payloads
//! stepped over. Streams of well-formed NATS publishes and Kafka Produce requests of mixed sizes,
//! cut into reads anywhere, through the range model of Envoy's buffer: every message is decided
//! once with its exact size, and what is forwarded is the stream itself, in order (a replaced
//! Produce swapped whole, even when its records were still arriving when it was decided).
#![no_main]

use libfuzzer_sys::fuzz_target;
use weighstation_core::kafka::{visit_produce, RequestHandler, RequestHeader, RequestStream, API_PRODUCE};
use weighstation_core::nats::{ClientHandler, ClientStream, Publish};
use weighstation_core::scan::{Admission, Outcome};
use weighstation_core::source::{Ranges, Source};

/// Sizes up to 70 KiB from the input: two bytes each, the first choosing small or large.
fn sizes(data: &[u8]) -> Vec<usize> {
    data.chunks_exact(2)
        .take(24)
        .map(|p| match p[0] % 4 {
            0 => usize::from(p[1]) * 280, // up to ~70 KiB
            _ => usize::from(p[1]) % 64,
        })
        .collect()
}

/// Cut points from the input: reads of 1 byte to 24 KiB.
fn reads(data: &[u8], len: usize) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut at = 0;
    for p in data.chunks_exact(2) {
        at += 1 + (usize::from(u16::from_le_bytes([p[0], p[1]])) % (24 << 10));
        if at >= len {
            break;
        }
        cuts.push(at);
    }
    cuts
}

/// Presents `stream` in reads cut at `cuts`, as Envoy does (a held buffer comes back with the
/// next read), and returns what was forwarded.
fn feed(stream: &[u8], cuts: &[usize], mut scan: impl FnMut(&mut dyn Source) -> Outcome) -> Vec<u8> {
    let (mut held, mut forwarded) = (Vec::new(), Vec::new());
    let mut last = 0;
    for cut in cuts.iter().copied().chain([stream.len()]) {
        held.extend_from_slice(&stream[last..cut]);
        last = cut;
        let o = scan(&mut Ranges::new(&held));
        if let Some(r) = o.replace {
            held = r;
        }
        if !o.hold {
            forwarded.append(&mut held);
        }
    }
    forwarded
}

#[derive(Default)]
struct Publishes(Vec<usize>);

impl ClientHandler for Publishes {
    fn connect(&mut self, _: &[u8]) -> Admission {
        Admission::Forward
    }
    fn ping(&mut self) {}
    fn subscribe(&mut self, _: &[u8]) -> Admission {
        Admission::Forward
    }
    fn publish(&mut self, p: &Publish<'_>) -> Admission {
        self.0.push(p.total_bytes);
        Admission::Forward
    }
}

/// Forwards each Produce, or replaces those whose correlation id is odd; records sizes.
#[derive(Default)]
struct Produces(Vec<(i32, u64)>);

impl RequestHandler for Produces {
    fn request(&mut self, h: &RequestHeader<'_>, body: Option<&mut dyn Source>) -> Admission {
        let (API_PRODUCE, Some(body)) = (h.api_key, body) else {
            return Admission::Forward;
        };
        let summary = visit_produce(body, h.api_version, &mut Vec::new(), |_| {});
        let records = summary.map(|s| s.bytes).unwrap_or(u64::MAX);
        self.0.push((h.correlation_id, records));
        if h.correlation_id % 2 == 1 {
            return Admission::Replace(b"SWAPPED".to_vec());
        }
        Admission::Forward
    }
}

/// A Produce v7 request of one topic, one partition, one record batch of `size` bytes.
fn produce(correlation_id: i32, size: usize) -> Vec<u8> {
    let mut batch = vec![0u8; 61 + size];
    let length = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    batch[16] = 2;
    batch[57..61].copy_from_slice(&1i32.to_be_bytes());
    let mut f = Vec::new();
    f.extend_from_slice(&API_PRODUCE.to_be_bytes());
    f.extend_from_slice(&7i16.to_be_bytes());
    f.extend_from_slice(&correlation_id.to_be_bytes());
    f.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
    f.extend_from_slice(&(-1i16).to_be_bytes()); // no transactional id
    f.extend_from_slice(&1i16.to_be_bytes()); // acks
    f.extend_from_slice(&1000i32.to_be_bytes());
    f.extend_from_slice(&1i32.to_be_bytes());
    f.extend_from_slice(&5i16.to_be_bytes());
    f.extend_from_slice(b"topic");
    f.extend_from_slice(&1i32.to_be_bytes());
    f.extend_from_slice(&0i32.to_be_bytes());
    f.extend_from_slice(&(batch.len() as i32).to_be_bytes());
    f.extend_from_slice(&batch);
    [(f.len() as i32).to_be_bytes().as_slice(), &f].concat()
}

fuzz_target!(|data: &[u8]| {
    let (head, rest) = data.split_at(data.len().min(48));
    let sizes = sizes(head);

    let mut nats = Vec::new();
    for (i, n) in sizes.iter().enumerate() {
        nats.extend_from_slice(format!("PUB s.{i} {n}\r\n").as_bytes());
        nats.resize(nats.len() + n, b'\n');
        nats.extend_from_slice(b"\r\n");
    }
    let (mut client, mut seen) = (ClientStream::default(), Publishes::default());
    let forwarded = feed(&nats, &reads(rest, nats.len()), |src| client.process(src, &mut seen));
    assert!(forwarded == nats, "NATS: the stream forwarded is not the stream sent");
    assert_eq!(seen.0, sizes, "NATS: a message decided twice, or with the wrong size");

    let mut kafka = Vec::new();
    let mut want = Vec::new();
    for (i, n) in sizes.iter().enumerate() {
        let frame = produce(i as i32, *n);
        want.extend_from_slice(if i % 2 == 1 { b"SWAPPED" } else { &frame });
        kafka.extend(frame);
    }
    let (mut requests, mut decided) = (RequestStream::new(1 << 20), Produces::default());
    let forwarded = feed(&kafka, &reads(rest, kafka.len()), |src| {
        requests.process(src, &mut decided).expect("well-formed requests")
    });
    assert!(
        forwarded == want,
        "Kafka: the stream forwarded is not the stream sent, swapped where refused"
    );
    let expected: Vec<(i32, u64)> = sizes
        .iter()
        .enumerate()
        .map(|(i, n)| (i as i32, (61 + n) as u64))
        .collect();
    assert_eq!(
        decided.0, expected,
        "Kafka: a request decided twice, or with the wrong size"
    );
});
