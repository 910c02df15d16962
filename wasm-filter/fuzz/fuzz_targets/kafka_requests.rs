//! Any bytes, in any split: the Kafka request scanner, the Produce walker and the parsers of
//! the requests decided per resource (authorization) never panic and never ask to buffer past their bounds. The buffer is handled as the glue does: forwarded
//! whole, or up to the held request, whose bytes are presented again with the next read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weighstation_core::kafka::{
    authz, authenticate_step, handshake_mechanism, quota_filter, visit_produce, Mechanism, RequestHandler, RequestHeader, RequestStream,
    MAX_HEADER_BYTES,
};
use weighstation_core::scan::Admission;
use weighstation_core::source::{Ranges, Source};

/// Walks every body it is given; holds each request once, then forwards or replaces it by
/// its correlation id, so holding, editing and forwarding all run.
#[derive(Default)]
struct Walk {
    held_once: bool,
}

impl RequestHandler for Walk {
    fn request(&mut self, h: &RequestHeader<'_>, body: Option<&mut dyn Source>) -> Admission {
        let Some(body) = body else { return Admission::Forward };
        let _ = visit_produce(body, h.api_version, &mut Vec::new(), |_| {});
        let b = body.all();
        for mechanism in [Mechanism::Plain, Mechanism::Scram, Mechanism::OAuthBearer] {
            let _ = authenticate_step(b, h.api_version, mechanism);
        }
        let _ = handshake_mechanism(b);
        // The requests decided per resource (weighstation_core::kafka::authz): admin, data
        // (groups, transactions, CreateTopics, AddPartitionsToTxn), Metadata and Fetch, against
        // grants some names match.
        if let Some(api) = authz::api_of(h.api_key).filter(|a| a.max_version.is_some()) {
            let some = |p: &str| Some(vec![p.to_string()]);
            let grants = authz::Grants {
                delete_topics: vec!["a*".into()],
                alter_topic_configs: vec!["?".into()],
                delete_groups: vec!["*".into()],
                produce: some("a*"),
                consume: some("?*"),
                groups: some("g*"),
                transactional_ids: some("*x"),
                create_topics: some("a?"),
                ..Default::default()
            };
            if api.class.decided_per_resource() {
                let _ = authz::decide(api, h.api_version, h.correlation_id, b, "t", &grants);
            } else {
                let _ = authz::decide_data(api, h.api_version, h.correlation_id, b, "t", &grants);
                let _ = authz::metadata_request(b, h.api_version, &grants);
            }
        }
        let _ = quota_filter(b, h.api_version);
        let _ = authz::decide_fetch(h.api_version, h.correlation_id, b, &authz::Grants {
            consume: Some(vec!["a*".into()]),
            ..Default::default()
        });
        self.held_once = !self.held_once;
        if self.held_once {
            return Admission::Hold;
        }
        match h.correlation_id.rem_euclid(3) {
            0 => Admission::Forward,
            1 => Admission::Replace(h.correlation_id.to_be_bytes().to_vec()),
            _ => Admission::Close(Vec::new()),
        }
    }
}

/// A frame within the hold limit, or a header within its bound, plus the read that completed it.
const MAX_HELD: usize = 4096 + MAX_HEADER_BYTES + 4;

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let mut scanner = RequestStream::new(4096);
    let mut walk = Walk::default();
    let mut held: Vec<u8> = Vec::new();
    for chunk in stream.chunks(usize::from(split).max(1)) {
        held.extend_from_slice(chunk);
        // A hold is retried once more, as a tick would, before the next read arrives.
        for _ in 0..2 {
            let Ok(outcome) = scanner.process(&mut Ranges::new(&held), &mut walk) else {
                return;
            };
            let out = outcome.replace.unwrap_or_else(|| held.clone());
            if !outcome.hold {
                held.clear();
                break;
            }
            assert!(
                outcome.decided <= out.len(),
                "decided {} of {}",
                outcome.decided,
                out.len()
            );
            held = out[outcome.decided..].to_vec();
            scanner.forwarded(outcome.decided);
            assert!(held.len() <= MAX_HELD + chunk.len(), "held {} bytes", held.len());
        }
    }
});
