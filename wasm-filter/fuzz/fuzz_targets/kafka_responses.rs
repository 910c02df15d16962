//! Any bytes, in any split, broker → client: the response scanner forwards exactly what a walk
//! of the whole stream frame by frame says it must (responses it was not asked to read pass
//! as they come; one it was asked to read is handed over once, whole, and replaced by the
//! handler's answer; after a size too small for a correlation id everything passes), so it
//! buffers at most one header or one response read whole. Each
//! response read whole goes, by its correlation id, through what the glue does with it: the
//! Produce throttle raised, the ApiVersions Produce version capped, the broker addresses of a
//! Metadata, FindCoordinator or DescribeCluster response rewritten (and, by a discovered
//! cluster, only fronted brokers named), a Produce response's NodeEndpoints rewritten, a SaslAuthenticate answer read, or the
//! answer replaced by a synthesised Produce response; and each keeps its promises.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use weighstation_core::kafka::{
    authenticate_answer, authz, cap_versions, describe_client_quotas, quota_filter, Caller, GatewayQuotas, produce_response, raise_produce_throttle, rewrite_brokers,
    rewrite_produce_endpoints, BrokerMap, Cluster, Interest, Route,
    PartitionError, ResponseHandler, ResponseStream, API_DESCRIBE_CLUSTER, API_FIND_COORDINATOR, API_METADATA,
    MAX_PRODUCE_VERSION, MAX_WHOLE, MIN_PRODUCE_VERSION, THROTTLING_QUOTA_EXCEEDED,
};
use weighstation_core::source::Ranges;

/// The address a broker advertises and the gateway's for it; the map swaps them, so rewriting
/// twice gives back the frame.
const BROKER: (&str, i32) = ("kafka-1.internal", 9092);
const GATEWAY: (&str, i32) = ("gateway.example.com", 19001);

/// Counts the endpoints it is asked about; `swap` exchanges BROKER and GATEWAY, else none moves.
struct Map {
    swap: bool,
    asked: Cell<usize>,
}

impl Map {
    fn new(swap: bool) -> Self {
        Map {
            swap,
            asked: Cell::new(0),
        }
    }
}

impl BrokerMap for Map {
    fn route(&self, _node: i32, host: &[u8], port: i32) -> Route<'_> {
        self.asked.set(self.asked.get() + 1);
        if !self.swap {
            Route::Keep
        } else if (host, port) == (BROKER.0.as_bytes(), BROKER.1) {
            Route::To(GATEWAY.0, GATEWAY.1)
        } else if (host, port) == (GATEWAY.0.as_bytes(), GATEWAY.1) {
            Route::To(BROKER.0, BROKER.1)
        } else {
            Route::Keep
        }
    }
}

/// Records every endpoint a response names, keeping each.
#[derive(Default)]
struct Named(RefCell<Vec<(i32, Vec<u8>, i32)>>);

impl BrokerMap for Named {
    fn route(&self, node: i32, host: &[u8], port: i32) -> Route<'_> {
        self.0.borrow_mut().push((node, host.to_vec(), port));
        Route::Keep
    }
}

/// A discovered cluster fronting nodes 1 and 3 of 0-9.
fn cluster() -> Cluster {
    Cluster {
        chain: "weighstation-kafka".into(),
        first_node: 0,
        last_node: 9,
        advertise_host: GATEWAY.0.into(),
        advertise_first_port: 30000,
        stride: 1,
        fronted: vec![1, 3],
    }
}

/// What a discovered cluster's rewrite gives parses again, and names only fronted nodes at
/// their gateway ports.
fn names_only_the_gateway(out: &[u8], check: impl Fn(&Named) -> Option<Vec<u8>>) {
    let named = Named::default();
    check(&named).expect("a rewritten response parses again");
    for (node, host, port) in named.0.into_inner() {
        assert!([1, 3].contains(&node), "node {node} handed out");
        assert_eq!((host.as_slice(), port), (GATEWAY.0.as_bytes(), 30000 + node), "in {out:?}");
    }
}

fn size_prefix_matches(frame: &[u8]) -> bool {
    frame
        .get(..4)
        .map(|s| i32::from_be_bytes(s.try_into().unwrap()))
        .and_then(|s| usize::try_from(s).ok())
        == Some(frame.len() - 4)
}

/// Where a response to this correlation id goes, as the glue's pending request says: the low
/// three bits pick what the glue does, the rest the request's version.
#[derive(Clone, Copy)]
struct Pending(u8);

impl Pending {
    fn version(self) -> i16 {
        i16::from(self.0 >> 3)
    }
}

/// What the glue would forward instead of `frame`, checking each helper's promises.
fn answer(pending: Pending, correlation_id: i32, frame: &[u8]) -> Option<Vec<u8>> {
    let version = pending.version();
    match pending.0 & 7 {
        // A delayed Produce: its throttle_time_ms is raised, in place, and never lowered.
        1 => {
            let delay = i32::from(pending.0) * 10;
            let mut patched = frame.to_vec();
            let Some(()) = raise_produce_throttle(&mut patched, version, delay) else {
                assert_eq!(patched, frame, "changed although it did not parse");
                return None;
            };
            assert_eq!(patched.len(), frame.len());
            let changed: Vec<usize> = (0..frame.len()).filter(|&i| patched[i] != frame[i]).collect();
            assert!(
                changed.last().zip(changed.first()).is_none_or(|(l, f)| l - f < 4),
                "more than throttle_time_ms changed: {changed:?}"
            );
            if let Some(rewritten) = rewrite_produce_endpoints(&patched, version, &cluster()) {
                assert!(size_prefix_matches(&rewritten));
                let again = rewrite_produce_endpoints(&rewritten, version, &cluster());
                assert_eq!(again.as_deref(), Some(rewritten.as_slice()), "rewriting twice changed it");
            }
            for lower in [delay, 0] {
                let mut again = patched.clone();
                raise_produce_throttle(&mut again, version, lower).expect("parsed once, parses again");
                assert_eq!(again, patched, "raising to {lower} again changed it");
            }
            Some(patched)
        }
        // ApiVersions: the advertised Produce and Fetch versions are capped, in place, idempotently.
        2 => {
            let mut patched = frame.to_vec();
            let Some(()) = cap_versions(&mut patched, version) else {
                assert_eq!(patched, frame, "changed although it did not parse");
                return None;
            };
            assert_eq!(patched.len(), frame.len());
            let mut again = patched.clone();
            cap_versions(&mut again, version).expect("parses again");
            assert_eq!(again, patched, "capping twice changed it");
            Some(patched)
        }
        // Metadata, FindCoordinator or DescribeCluster: broker addresses rewritten.
        3 => {
            let out = rewritten(frame, API_METADATA, version);
            filtered(out.as_deref().unwrap_or(frame), version % 13);
            quotas(frame, version % 2);
            out
        }
        4 if version >= 16 => rewritten(frame, API_DESCRIBE_CLUSTER, version % 3),
        4 => rewritten(frame, API_FIND_COORDINATOR, version),
        // SaslAuthenticate: read, never changed.
        5 => {
            let _ = authenticate_answer(frame, version);
            None
        }
        // A refused Produce: the broker's answer to the ApiVersions sent in its place is
        // replaced by the refusal, whose throttle the glue can still find.
        6 => {
            let version = MIN_PRODUCE_VERSION + version % (MAX_PRODUCE_VERSION - MIN_PRODUCE_VERSION + 1);
            let topics = [(
                frame.get(8..16).unwrap_or_default().to_vec(),
                vec![PartitionError {
                    partition: correlation_id,
                    error: THROTTLING_QUOTA_EXCEEDED,
                }],
            )];
            let mut refusal = produce_response(version, correlation_id, &topics, 250, Some(b"over the rate"));
            assert!(size_prefix_matches(&refusal));
            raise_produce_throttle(&mut refusal, version, 500).expect("a synthesised response parses");
            Some(refusal)
        }
        // Read whole and kept.
        _ => None,
    }
}

/// The topic filter of Metadata (authorization): a filtered frame's size prefix matches, and
/// filtering it again changes nothing more.
fn filtered(frame: &[u8], version: i16) {
    let grants = authz::Grants {
        produce: Some(vec!["a*".into()]),
        consume: Some(vec!["?".into()]),
        ..Default::default()
    };
    for all_topics in [true, false] {
        let Some(once) = authz::filter_metadata(frame, version, all_topics, &grants) else {
            continue;
        };
        assert!(size_prefix_matches(&once.frame), "size prefix of the filtered frame");
        let twice = authz::filter_metadata(&once.frame, version, all_topics, &grants);
        match twice {
            None => assert!(all_topics, "a refused topic is kept as an entry"),
            Some(twice) => assert_eq!(twice.frame, once.frame, "filtering twice"),
        }
    }
}

/// DescribeClientQuotas for a caller: a rewritten frame's size prefix matches, and rewriting it
/// again changes nothing (the caller's entries kept, the gateway's values already in place).
fn quotas(frame: &[u8], version: i16) {
    let caller = Caller {
        user: Some(b"u"),
        client_id: Some(b"c"),
    };
    let gateway = GatewayQuotas {
        producer_byte_rate: Some(1 << 20),
        consumer_byte_rate: None,
    };
    let filter = quota_filter(&[0, 0, 0, 0, 0], 0).expect("no components, not strict");
    let Some(once) = describe_client_quotas(frame, version, &filter, &caller, &gateway) else {
        return;
    };
    assert!(size_prefix_matches(&once), "size prefix of the rewritten frame");
    let twice = describe_client_quotas(&once, version, &filter, &caller, &gateway).expect("parses again");
    assert_eq!(twice, once, "rewriting twice");
}

/// The address rewrite: whether a frame parses does not depend on the map; a rewrite that
/// moves nothing gives the frame back as it was; the rewritten frame has a size prefix that
/// matches and parses again with the same number of endpoints; swapping back and forth again
/// gives it back (only the endpoints moved, everything else was copied).
fn rewritten(frame: &[u8], api_key: i16, version: i16) -> Option<Vec<u8>> {
    let (same, swap) = (Map::new(false), Map::new(true));
    let unmoved = rewrite_brokers(frame, api_key, version, &same);
    let out = rewrite_brokers(frame, api_key, version, &swap);
    assert_eq!(unmoved.is_some(), out.is_some(), "parsing depends on the map");
    let (unmoved, out) = (unmoved?, out?);
    assert_eq!(unmoved, frame, "a rewrite that moves nothing changed the frame");
    assert!(size_prefix_matches(&out), "size prefix of the rewritten frame");
    let endpoints = swap.asked.get();
    assert_eq!(same.asked.get(), endpoints);

    let back = Map::new(true);
    let swapped_back = rewrite_brokers(&out, api_key, version, &back).expect("the rewritten frame parses");
    assert_eq!(back.asked.get(), endpoints, "endpoints after the rewrite");
    assert_eq!(
        rewrite_brokers(&swapped_back, api_key, version, &Map::new(true)).as_deref(),
        Some(out.as_slice()),
        "swapping back and forth again"
    );
    if let Some(withheld) = rewrite_brokers(frame, api_key, version, &cluster()) {
        names_only_the_gateway(&withheld, |named| rewrite_brokers(&withheld, api_key, version, named));
    }
    if swapped_back.len() == frame.len() {
        // The frame encoded its moved hosts as the rewrite does (no over-long lengths).
        assert_eq!(swapped_back, frame, "swapping back");
    }
    Some(out)
}

/// The glue's pending requests, drawn from the input: correlation ids pick one of `choices`.
struct Glue<'a> {
    choices: &'a [u8],
    /// Each response read whole: the frame handed over and what replaces it.
    answered: VecDeque<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Glue<'_> {
    fn pending(&self, correlation_id: i32) -> Option<Pending> {
        let n = self.choices.len();
        let c = *self.choices.get((correlation_id as u32 as usize).checked_rem(n)?)?;
        (c & 7 != 0).then_some(Pending(c))
    }
}

impl ResponseHandler for Glue<'_> {
    fn arriving(&mut self, correlation_id: i32, _size: usize) -> Interest {
        match self.pending(correlation_id) {
            Some(_) => Interest::Whole,
            None => Interest::Pass,
        }
    }

    fn response(&mut self, correlation_id: i32, frame: &[u8]) -> Option<Vec<u8>> {
        let pending = self
            .pending(correlation_id)
            .expect("only responses asked for are read whole");
        assert!(frame.len() <= MAX_WHOLE);
        assert!(size_prefix_matches(frame), "handed a frame that is not whole");
        assert_eq!(frame.get(4..8), Some(&correlation_id.to_be_bytes()[..]));
        let with = answer(pending, correlation_id, frame);
        self.answered.push_back((frame.to_vec(), with.clone()));
        with
    }
}

/// The stream walked as a whole: where the next frame starts, where a passed one ends, and
/// what must have been forwarded by now.
#[derive(Default)]
struct Walk {
    pos: usize,
    pass_end: usize,
    out: Vec<u8>,
    /// A size too small to hold a correlation id: from there on the stream passes as it is.
    unframed: bool,
}

impl Walk {
    fn advance(&mut self, s: &[u8], glue: &mut Glue<'_>) {
        loop {
            if self.unframed {
                self.out.extend_from_slice(&s[self.pos..]);
                self.pos = s.len();
                return;
            }
            if self.pass_end > self.pos {
                let end = self.pass_end.min(s.len());
                self.out.extend_from_slice(&s[self.pos..end]);
                self.pos = end;
                if self.pos < self.pass_end {
                    return;
                }
            }
            let Some(header) = s.get(self.pos..self.pos + 8) else {
                return;
            };
            let size = i32::from_be_bytes(header[..4].try_into().unwrap());
            let correlation_id = i32::from_be_bytes(header[4..].try_into().unwrap());
            if size < 4 {
                self.unframed = true;
                continue;
            }
            let total = 4 + usize::try_from(size).unwrap_or(0);
            if glue.pending(correlation_id).is_some() && total <= MAX_WHOLE {
                let Some(frame) = s.get(self.pos..self.pos + total) else {
                    return;
                };
                let (handed, with) = glue.answered.pop_front().expect("a whole response was not handed over");
                assert_eq!(handed, frame, "handed a different frame");
                self.out.extend(with.unwrap_or(handed));
                self.pos += total;
            } else {
                self.pass_end = self.pos + total;
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (choices, stream) = rest.split_at(rest.len().min(8));
    let mut glue = Glue {
        choices,
        answered: VecDeque::new(),
    };
    let mut scanner = ResponseStream::default();
    let mut walk = Walk::default();
    let mut forwarded = Vec::new();
    for (i, chunk) in stream.chunks(usize::from(split).max(1)).enumerate() {
        match scanner.process(&mut Ranges::new(chunk), &mut glue) {
            Some(r) => forwarded.extend(r),
            None => forwarded.extend_from_slice(chunk),
        }
        let given = &stream[..(i * usize::from(split).max(1) + chunk.len())];
        walk.advance(given, &mut glue);
        assert!(glue.answered.is_empty(), "a response handed over before it was whole");
        assert!(
            forwarded == walk.out,
            "forwarded differs from the walk of the whole stream"
        );
        // Buffered: a header not yet whole, or a response being read whole.
        assert!(
            given.len() - walk.pos <= MAX_WHOLE.max(7),
            "buffered {}",
            given.len() - walk.pos
        );
    }
});
