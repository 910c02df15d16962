//! Any bytes, in any split: the Kafka request scanner and the Produce walker never panic and
//! never ask to buffer past their bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weighstation_core::kafka::{sasl_plain_user, MAX_HEADER_BYTES, visit_produce, RequestHandler, RequestHeader, RequestStream, StreamOutcome};

struct Walk;

impl RequestHandler for Walk {
    fn request(&mut self, h: &RequestHeader<'_>, body: Option<&[u8]>) {
        if let Some(b) = body {
            let _ = visit_produce(b, h.api_version, |_| {});
            let _ = sasl_plain_user(b, h.api_version);
        }
    }
}

/// A frame within the hold limit, or a header within its bound, plus the read that completed it.
const MAX_HELD: usize = 4096 + MAX_HEADER_BYTES + 4;

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else { return };
    let mut scanner = RequestStream::new(4096);
    let mut held: Vec<u8> = Vec::new();
    for chunk in stream.chunks(usize::from(split).max(1)) {
        held.extend_from_slice(chunk);
        match scanner.process(&held, &mut Walk) {
            StreamOutcome::Forward => held.clear(),
            StreamOutcome::Hold => assert!(held.len() <= MAX_HELD, "held {} bytes", held.len()),
            StreamOutcome::Close(_) => return,
        }
    }
});
