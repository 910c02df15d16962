//! Real client bytes: the fuzz seeds recorded from sarama (control-plane/e2e/capture_test.go)
//! are scanned, and every Produce in them must be read exactly.

use weighstation_core::kafka::{visit_produce, RequestHandler, RequestHeader, RequestStream, API_PRODUCE};
use weighstation_core::scan::Admission;
use weighstation_core::source::{Ranges, Source};

#[derive(Default)]
struct Produces {
    read: Vec<(i16, u64)>,
    failed: Vec<String>,
}

impl RequestHandler for Produces {
    fn request(&mut self, h: &RequestHeader<'_>, body: Option<&mut dyn Source>) -> Admission {
        if let (API_PRODUCE, Some(body)) = (h.api_key, body) {
            match visit_produce(body, h.api_version, &mut Vec::new(), |_| {}) {
                Ok(s) => self.read.push((h.api_version, s.records)),
                Err(e) => self.failed.push(format!("v{}: {e:?}", h.api_version)),
            }
        }
        Admission::Forward
    }
}

#[test]
fn every_produce_sarama_sent_is_read() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/seeds/kafka_requests");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.file_name().unwrap().to_string_lossy().starts_with("sarama-") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let mut h = Produces::default();
        let outcome = RequestStream::new(1 << 20)
            .process(&mut Ranges::new(&bytes[1..]), &mut h)
            .unwrap();
        assert!(!outcome.hold, "{path:?}: a complete capture left something incomplete");
        assert!(h.failed.is_empty(), "{path:?}: {:?}", h.failed);
        assert_eq!(h.read.len(), 1, "{path:?}");
        assert_eq!(h.read[0].1, 5, "{path:?}: five records per produce");
        seen += 1;
    }
    assert!(seen >= 4, "only {seen} sarama captures found");
}
