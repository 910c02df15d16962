//! Kafka brokers this worker has seen named in the responses of a discovered cluster
//! (docs/kafka.md "In front of a Kafka cluster"). The filter cannot open a listener or choose an
//! upstream: the control plane does both, over xDS, for every replica at once. So the brokers
//! go to it with each usage report (`brokers`), all of them every time, and it gives each one
//! in range a listener and an upstream; until the configuration says a node id is fronted, the
//! rewriter withholds it.

use std::cell::RefCell;
use std::collections::HashMap;
use weighstation_core::report::SeenBroker;

use crate::clock::now_ns;

/// The most brokers a worker remembers: more than any cluster's ranges hold. A response that
/// names more new ones than this is hostile, and what it adds is not kept.
const MAX_SEEN: usize = 4096;

/// Longest host kept: DNS names are at most 253 bytes; a longer one is no broker's.
const MAX_HOST: usize = 255;

#[derive(Default)]
struct Seen {
    /// Filter chain → node id → (host, port, last seen ms).
    chains: HashMap<String, HashMap<i32, (String, i32, u64)>>,
    count: usize,
}

thread_local! {
    static SEEN: RefCell<Seen> = RefCell::new(Seen::default());
}

/// When a response is seen: one clock read for every broker it names.
pub fn now_ms() -> u64 {
    now_ns() / 1_000_000
}

/// A response on `chain`'s listeners at `at_ms` named broker `node` at (host, port).
pub fn saw(chain: &str, node: i32, host: &[u8], port: i32, at_ms: u64) {
    if host.len() > MAX_HOST {
        return;
    }
    SEEN.with(|s| {
        let mut s = s.borrow_mut();
        let Seen { chains, count } = &mut *s;
        if let Some(entry) = chains.get_mut(chain).and_then(|nodes| nodes.get_mut(&node)) {
            if entry.0.as_bytes() != host || entry.1 != port {
                entry.0 = String::from_utf8_lossy(host).into_owned();
                entry.1 = port;
            }
            entry.2 = at_ms;
            return;
        }
        if *count >= MAX_SEEN {
            return;
        }
        *count += 1;
        chains
            .entry(chain.to_owned())
            .or_default()
            .insert(node, (String::from_utf8_lossy(host).into_owned(), port, at_ms));
    });
}

/// Every broker seen, for a report.
pub fn seen() -> Vec<SeenBroker> {
    SEEN.with(|s| {
        let s = s.borrow();
        let mut out = Vec::with_capacity(s.count);
        for (chain, nodes) in &s.chains {
            for (&node, (host, port, seen_ms)) in nodes {
                out.push(SeenBroker {
                    chain: chain.clone(),
                    node,
                    host: host.clone(),
                    port: *port,
                    seen_ms: *seen_ms,
                });
            }
        }
        out
    })
}
