//! Any bytes, in any split, broker → client, every response a Fetch the filter walks (the read
//! side, limits.consume): the scanner never panics and forwards the stream as it came except for
//! throttle_time_ms, raised in place once per response at most; each response's head is reported
//! once and its walk ends once, and the record bytes it reports fit in the response.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weighstation_core::kafka::{Interest, ResponseHandler, ResponseStream, MAX_FETCH_VERSION, MIN_FETCH_VERSION};
use weighstation_core::source::Ranges;

struct Fetches {
    version: i16,
    raise: i32,
    heads: usize,
    dones: usize,
    /// The size of the response being walked, and the record bytes reported for it.
    walking: Option<(usize, u64)>,
}

impl ResponseHandler for Fetches {
    fn arriving(&mut self, _correlation_id: i32, _size: usize) -> Interest {
        Interest::Fetch(self.version)
    }

    fn response(&mut self, _correlation_id: i32, _frame: &[u8]) -> Option<Vec<u8>> {
        panic!("a walked response is never read whole");
    }

    fn fetch_head(&mut self, size: usize, _throttle_ms: i32) -> Option<i32> {
        assert!(self.walking.is_none(), "a head reported before the last walk ended");
        self.heads += 1;
        self.walking = Some((size, 0));
        Some(self.raise)
    }

    fn fetch_records(&mut self, _topic: &[u8], bytes: u64) {
        let (size, records) = self.walking.as_mut().expect("records reported outside a walk");
        *records += bytes;
        assert!(*records <= *size as u64, "{records} record bytes in a response of {size}");
    }

    fn fetch_done(&mut self, _complete: bool) {
        assert!(self.walking.take().is_some(), "a walk ended twice");
        self.dones += 1;
    }
}

fuzz_target!(|data: &[u8]| {
    let [split, version, raise, stream @ ..] = data else {
        return;
    };
    let span = MAX_FETCH_VERSION - MIN_FETCH_VERSION + 1;
    let mut h = Fetches {
        version: MIN_FETCH_VERSION + i16::from(*version) % span,
        raise: i32::from(*raise) * 1000,
        heads: 0,
        dones: 0,
        walking: None,
    };
    let mut scanner = ResponseStream::default();
    let mut forwarded = Vec::new();
    for chunk in stream.chunks(usize::from(*split).max(1)) {
        match scanner.process(&mut Ranges::new(chunk), &mut h) {
            Some(r) => forwarded.extend(r),
            None => forwarded.extend_from_slice(chunk),
        }
    }
    assert!(forwarded.len() <= stream.len(), "forwarded more than came");
    assert!(stream.len() - forwarded.len() < 600, "carried {} bytes", stream.len() - forwarded.len());
    // What changed: windows of at most 4 bytes (a throttle raised), at most one per head.
    let changed: Vec<usize> = (0..forwarded.len()).filter(|&i| forwarded[i] != stream[i]).collect();
    let mut windows = 0;
    let mut start = None;
    for &i in &changed {
        match start {
            Some(s) if i - s < 4 => {}
            _ => {
                windows += 1;
                start = Some(i);
            }
        }
    }
    assert!(windows <= h.heads, "{windows} changes for {} heads", h.heads);
    assert!(h.heads - h.dones <= 1, "{} heads, {} walks ended", h.heads, h.dones);
});
