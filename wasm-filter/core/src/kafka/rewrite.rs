//! Broker address rewriting, so clients of a cluster whose brokers advertise their own
//! addresses still come back through the gateway. Every response that names a broker is
//! re-encoded with the gateway's address for it ([`BrokerMap`]): Metadata and DescribeCluster
//! (brokers, and the controller id), FindCoordinator (coordinators) and the `NodeEndpoints` of
//! Produce v10+ (KIP-951). A broker the map withholds is left out of a broker list, and a
//! coordinator it withholds is answered COORDINATOR_NOT_AVAILABLE, so no client ever learns
//! an address the gateway does not front. The rest of a response is copied as it is.

use super::brokers::{BrokerMap, Route};
use super::cursor::Cursor;
use super::response::produce_throttle_offset;

pub const API_METADATA: i16 = 3;
pub const API_FIND_COORDINATOR: i16 = 10;
/// DescribeCluster (KIP-700): what admin tools (kafka-cluster.sh, Admin.describeCluster) read
/// the brokers from.
pub const API_DESCRIBE_CLUSTER: i16 = 60;
/// Kafka's error for a coordinator that cannot be reached now: every client looks again.
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// DescribeCluster v1+ `endpoint_type` 2 lists KRaft controllers (KIP-919), which the gateway
/// does not front.
const CONTROLLER_ENDPOINTS: u8 = 2;
/// The first Produce response version with `NodeEndpoints` (tag 0 of its tagged fields).
const FIRST_NODE_ENDPOINTS_PRODUCE: i16 = 10;

struct Writer {
    out: Vec<u8>,
    flexible: bool,
}

impl Writer {
    fn raw(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    fn uvarint(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.out.push(byte);
                return;
            }
            self.out.push(byte | 0x80);
        }
    }

    fn string(&mut self, s: &[u8]) {
        if self.flexible {
            self.uvarint(s.len() as u64 + 1);
        } else {
            self.raw(&(s.len() as i16).to_be_bytes());
        }
        self.raw(s);
    }

    fn array_len(&mut self, n: usize) {
        if self.flexible {
            self.uvarint(n as u64 + 1);
        } else {
            self.raw(&(n as i32).to_be_bytes());
        }
    }

    fn patch_i32(&mut self, at: usize, v: i32) -> Option<()> {
        self.out.get_mut(at..at + 4)?.copy_from_slice(&v.to_be_bytes());
        Some(())
    }
}

/// Which brokers of a list were left out, and the first one kept (for a controller id that
/// named a withheld one).
#[derive(Default)]
struct Listed {
    withheld: Vec<i32>,
    first_kept: Option<i32>,
}

impl Listed {
    /// The id a response should name for `node`: itself unless it was withheld, then another
    /// broker the client can reach (KRaft brokers forward controller requests), or none.
    fn reachable(&self, node: i32) -> i32 {
        if self.withheld.contains(&node) {
            self.first_kept.unwrap_or(-1)
        } else {
            node
        }
    }
}

/// One endpoint (host, port, encoded at `at..end`) routed; Err(()) if it is withheld (nothing
/// written).
fn endpoint(frame: &[u8], w: &mut Writer, route: Route<'_>, at: usize, end: usize) -> Option<Result<(), ()>> {
    match route {
        Route::To(h, p) => {
            w.string(h.as_bytes());
            w.raw(&p.to_be_bytes());
        }
        // As it was encoded: an over-long varint length or a null host stays what it was.
        Route::Keep => w.raw(frame.get(at..end)?),
        Route::Withhold => return Some(Err(())),
    }
    Some(Ok(()))
}

/// A coordinator answer: one that is an error (node -1, no address) is the broker's to give,
/// as it is; any other is routed.
fn coordinator<'m>(map: &'m impl BrokerMap, error_code: i16, node: i32, host: &[u8], port: i32) -> Route<'m> {
    if error_code != 0 || node < 0 {
        Route::Keep
    } else {
        map.route(node, host, port)
    }
}

/// An array of entries, each a node id, an endpoint and more fields: `before` reads what
/// precedes the endpoint and returns the node id, `after` what follows it; both are copied as
/// they are. An entry whose broker is withheld is left out (and the count with it).
fn endpoints(
    frame: &[u8],
    c: &mut Cursor<'_>,
    w: &mut Writer,
    map: &impl BrokerMap,
    controllers: bool,
    before: impl Fn(&mut Cursor<'_>) -> Option<i32>,
    after: impl Fn(&mut Cursor<'_>) -> Option<()>,
) -> Option<Listed> {
    let at = c.position();
    let n = c.array_len(w.flexible)?;
    let count = frame.get(at..c.position())?;
    let mut entries = Writer {
        out: Vec::new(),
        flexible: w.flexible,
    };
    let mut listed = Listed::default();
    for _ in 0..n {
        let at = c.position();
        let node = before(c)?;
        let head = frame.get(at..c.position())?;
        let at = c.position();
        let host = c.string_field(w.flexible)?.unwrap_or_default();
        let port = c.i32()?;
        let route = if controllers {
            map.route_controller(node, host, port)
        } else {
            map.route(node, host, port)
        };
        let mark = entries.out.len();
        entries.raw(head);
        let written = endpoint(frame, &mut entries, route, at, c.position())?;
        let at = c.position();
        after(c)?;
        match written {
            Ok(()) => {
                entries.raw(frame.get(at..c.position())?);
                listed.first_kept.get_or_insert(node);
            }
            Err(()) => {
                entries.out.truncate(mark);
                listed.withheld.push(node);
            }
        }
    }
    if listed.withheld.is_empty() {
        w.raw(count); // as encoded (a null array stays null)
    } else {
        w.array_len(n - listed.withheld.len());
    }
    w.raw(&entries.out);
    Some(listed)
}

/// Copies what the cursor moved over since `from`.
fn copy_since(frame: &[u8], c: &Cursor<'_>, from: usize, w: &mut Writer) -> Option<()> {
    w.raw(frame.get(from..c.position())?);
    Some(())
}

fn node_id(c: &mut Cursor<'_>) -> Option<i32> {
    c.i32()
}

/// Rewrites the broker addresses of a whole response frame (size prefix included); None if the
/// response is not one that carries addresses, is not whole or does not parse.
pub fn rewrite_brokers(frame: &[u8], api_key: i16, version: i16, map: &impl BrokerMap) -> Option<Vec<u8>> {
    let flexible = match api_key {
        API_METADATA => version >= 9,
        API_FIND_COORDINATOR => version >= 3,
        API_DESCRIBE_CLUSTER => true,
        _ => return None,
    };
    let mut c = Cursor::new(frame);
    let mut w = Writer {
        out: Vec::with_capacity(frame.len() + 64),
        flexible,
    };
    let start = whole(&mut c, frame)?;
    c.i32()?; // correlation id
    if flexible {
        c.skip_tagged_fields()?;
    }
    match api_key {
        API_METADATA => metadata(frame, &mut c, &mut w, map, version, start)?,
        API_DESCRIBE_CLUSTER => describe_cluster(frame, &mut c, &mut w, map, version, start)?,
        _ => find_coordinator(frame, &mut c, &mut w, map, version, start)?,
    }
    w.raw(frame.get(c.position()..)?);
    sized(w.out)
}

/// Reads the size prefix of a frame that must be whole: what follows the addresses is copied
/// as it is, so a cut one would go out complete-looking under a size recomputed from what is
/// there. Returns where the frame's body starts.
fn whole(c: &mut Cursor<'_>, frame: &[u8]) -> Option<usize> {
    let size = c.i32()?;
    let start = c.position();
    (usize::try_from(size).ok()? == frame.len() - start).then_some(start)
}

fn sized(body: Vec<u8>) -> Option<Vec<u8>> {
    let size = i32::try_from(body.len()).ok()?;
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend(body);
    Some(out)
}

fn metadata(
    frame: &[u8],
    c: &mut Cursor<'_>,
    w: &mut Writer,
    map: &impl BrokerMap,
    version: i16,
    start: usize,
) -> Option<()> {
    let flexible = w.flexible;
    if version >= 3 {
        c.i32()?; // throttle
    }
    copy_since(frame, c, start, w)?;
    let listed = endpoints(frame, c, w, map, false, node_id, |c| {
        if version >= 1 {
            c.string_field(flexible)?; // rack
        }
        if flexible {
            c.skip_tagged_fields()?;
        }
        Some(())
    })?;
    let at = c.position();
    if version >= 2 {
        c.string_field(flexible)?; // cluster id
    }
    copy_since(frame, c, at, w)?;
    if version >= 1 {
        let controller = c.i32()?;
        w.raw(&listed.reachable(controller).to_be_bytes());
    }
    Some(())
}

fn describe_cluster(
    frame: &[u8],
    c: &mut Cursor<'_>,
    w: &mut Writer,
    map: &impl BrokerMap,
    version: i16,
    start: usize,
) -> Option<()> {
    c.i32()?; // throttle
    c.i16()?; // error code
    c.compact_nullable()?; // error message
    let endpoint_type = if version >= 1 { *c.bytes(1)?.first()? } else { 1 };
    c.compact_nullable()?; // cluster id
    copy_since(frame, c, start, w)?;
    let controller_at = w.out.len();
    let controller = c.i32()?;
    w.raw(&controller.to_be_bytes());
    let controllers = endpoint_type == CONTROLLER_ENDPOINTS;
    let listed = endpoints(frame, c, w, map, controllers, node_id, |c| {
        c.compact_nullable()?; // rack
        if version >= 2 {
            c.bytes(1)?; // is fenced
        }
        c.skip_tagged_fields()
    })?;
    w.patch_i32(controller_at, listed.reachable(controller))
}

fn find_coordinator(
    frame: &[u8],
    c: &mut Cursor<'_>,
    w: &mut Writer,
    map: &impl BrokerMap,
    version: i16,
    start: usize,
) -> Option<()> {
    let flexible = w.flexible;
    if version >= 1 {
        c.i32()?; // throttle
    }
    if version >= 4 {
        copy_since(frame, c, start, w)?;
        let at = c.position();
        let n = c.array_len(true)?;
        copy_since(frame, c, at, w)?;
        for _ in 0..n {
            let at = c.position();
            c.compact_nullable()?; // key
            copy_since(frame, c, at, w)?;
            let node = c.i32()?;
            let at = c.position();
            let host = c.compact_nullable()?.unwrap_or_default();
            let port = c.i32()?;
            let end = c.position();
            let error_code = c.i16()?;
            match coordinator(map, error_code, node, host, port) {
                Route::Withhold => unavailable(w, COORDINATOR_NOT_AVAILABLE),
                route => {
                    w.raw(&node.to_be_bytes());
                    endpoint(frame, w, route, at, end)?.ok()?;
                    w.raw(&error_code.to_be_bytes());
                }
            }
            let message_at = c.position();
            c.compact_nullable()?; // error message
            c.skip_tagged_fields()?;
            copy_since(frame, c, message_at, w)?;
        }
    } else {
        copy_since(frame, c, start, w)?;
        let error_code = c.i16()?;
        let message_at = c.position();
        if version >= 1 {
            c.string_field(flexible)?; // error message
        }
        let message = frame.get(message_at..c.position())?;
        let node = c.i32()?;
        let at = c.position();
        let host = c.string_field(flexible)?.unwrap_or_default();
        let port = c.i32()?;
        match coordinator(map, error_code, node, host, port) {
            Route::Withhold => {
                w.raw(&COORDINATOR_NOT_AVAILABLE.to_be_bytes());
                w.raw(message);
                w.raw(&(-1i32).to_be_bytes());
                w.string(b"");
                w.raw(&(-1i32).to_be_bytes());
            }
            route => {
                w.raw(&error_code.to_be_bytes());
                w.raw(message);
                w.raw(&node.to_be_bytes());
                endpoint(frame, w, route, at, c.position())?.ok()?;
            }
        }
    }
    Some(())
}

/// A v4+ coordinator entry's node, host, port and error for a broker the gateway withholds.
fn unavailable(w: &mut Writer, error: i16) {
    w.raw(&(-1i32).to_be_bytes());
    w.string(b"");
    w.raw(&(-1i32).to_be_bytes());
    w.raw(&error.to_be_bytes());
}

/// Rewrites the `NodeEndpoints` a Produce v10+ response carries (KIP-951: where the new leader
/// of a partition that moved is, tag 0 of the response's tagged fields); None if there are
/// none, or the frame is not whole or does not parse: then it goes as it is. Withheld brokers
/// are left out: the client then looks its partitions' leaders up in Metadata.
pub fn rewrite_produce_endpoints(frame: &[u8], version: i16, map: &impl BrokerMap) -> Option<Vec<u8>> {
    if version < FIRST_NODE_ENDPOINTS_PRODUCE {
        return None;
    }
    let mut c = Cursor::new(frame);
    let start = whole(&mut c, frame)?;
    let tags_at = produce_throttle_offset(frame, version)?.checked_add(4)?;
    c.bytes(tags_at - start)?;
    let mut w = Writer {
        out: Vec::with_capacity(frame.len() + 64),
        flexible: true,
    };
    w.raw(frame.get(start..tags_at)?);
    let count = c.uvarint()?;
    w.uvarint(u64::from(count));
    let mut found = false;
    for _ in 0..count {
        let tag = c.uvarint()?;
        let size = usize::try_from(c.uvarint()?).ok()?;
        let data = c.bytes(size)?;
        w.uvarint(u64::from(tag));
        if tag != 0 {
            w.uvarint(size as u64);
            w.raw(data);
            continue;
        }
        found = true;
        let mut inner = Cursor::new(data);
        let mut rewritten = Writer {
            out: Vec::with_capacity(size + 32),
            flexible: true,
        };
        endpoints(data, &mut inner, &mut rewritten, map, false, node_id, |c| {
            c.compact_nullable()?; // rack
            c.skip_tagged_fields()
        })?;
        if inner.position() != data.len() {
            return None;
        }
        w.uvarint(rewritten.out.len() as u64);
        w.raw(&rewritten.out);
    }
    if !found || c.position() != frame.len() {
        return None;
    }
    sized(w.out)
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod tests;
