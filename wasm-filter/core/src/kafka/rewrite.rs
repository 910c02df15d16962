//! Broker address rewriting, so clients of a cluster whose brokers advertise their own
//! addresses still come back through the gateway: Metadata and DescribeCluster (brokers) and
//! FindCoordinator (coordinator) responses are re-encoded with each broker's gateway address.
//! The rest of a response is copied as it is.

use super::cursor::Cursor;

pub const API_METADATA: i16 = 3;
pub const API_FIND_COORDINATOR: i16 = 10;
/// DescribeCluster (KIP-700): what admin tools (kafka-cluster.sh, Admin.describeCluster) read
/// the brokers from.
pub const API_DESCRIBE_CLUSTER: i16 = 60;

/// Where clients should reach a broker advertised at (host, port), if the gateway fronts it.
pub trait BrokerMap {
    fn gateway_for(&self, host: &[u8], port: i32) -> Option<(&str, i32)>;
}

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
}

/// Reads one broker endpoint (host, port) and writes it back, rewritten if the map knows it;
/// one it does not know is copied as it was encoded.
fn endpoint(frame: &[u8], c: &mut Cursor<'_>, w: &mut Writer, map: &impl BrokerMap) -> Option<()> {
    let at = c.position();
    let host = c.string_field(w.flexible)?.unwrap_or_default();
    let port = c.i32()?;
    match map.gateway_for(host, port) {
        Some((h, p)) => {
            w.string(h.as_bytes());
            w.raw(&p.to_be_bytes());
        }
        None => copy_since(frame, c, at, w)?,
    }
    Some(())
}

/// An array of entries, each an endpoint between other fields: `before` and `after` read those
/// fields, which are copied as they are; the endpoint is rewritten.
fn endpoints(
    frame: &[u8],
    c: &mut Cursor<'_>,
    w: &mut Writer,
    map: &impl BrokerMap,
    before: impl Fn(&mut Cursor<'_>) -> Option<()>,
    after: impl Fn(&mut Cursor<'_>) -> Option<()>,
) -> Option<()> {
    let at = c.position();
    let n = c.array_len(w.flexible)?;
    copy_since(frame, c, at, w)?;
    for _ in 0..n {
        let at = c.position();
        before(c)?;
        copy_since(frame, c, at, w)?;
        endpoint(frame, c, w, map)?;
        let at = c.position();
        after(c)?;
        copy_since(frame, c, at, w)?;
    }
    Some(())
}

/// Copies what the cursor moved over since `from`.
fn copy_since(frame: &[u8], c: &Cursor<'_>, from: usize, w: &mut Writer) -> Option<()> {
    w.raw(frame.get(from..c.position())?);
    Some(())
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
    let size = c.i32()?; // rewritten at the end
    let start = c.position();
    // Only a whole frame: what follows the addresses is copied as it is, so a cut one would go
    // out complete-looking under a size recomputed from what is there.
    if usize::try_from(size).ok()? != frame.len() - start {
        return None;
    }
    c.i32()?; // correlation id
    if flexible {
        c.skip_tagged_fields()?;
    }
    match api_key {
        API_METADATA => {
            if version >= 3 {
                c.i32()?; // throttle
            }
            copy_since(frame, &c, start, &mut w)?;
            let node_id = |c: &mut Cursor<'_>| c.i32().map(drop);
            endpoints(frame, &mut c, &mut w, map, node_id, |c| {
                if version >= 1 {
                    c.string_field(flexible)?; // rack
                }
                if flexible {
                    c.skip_tagged_fields()?;
                }
                Some(())
            })?;
        }
        API_DESCRIBE_CLUSTER => {
            c.i32()?; // throttle
            c.i16()?; // error code
            c.compact_nullable()?; // error message
            if version >= 1 {
                c.bytes(1)?; // endpoint type
            }
            c.compact_nullable()?; // cluster id
            c.i32()?; // controller id
            copy_since(frame, &c, start, &mut w)?;
            let broker_id = |c: &mut Cursor<'_>| c.i32().map(drop);
            endpoints(frame, &mut c, &mut w, map, broker_id, |c| {
                c.compact_nullable()?; // rack
                if version >= 2 {
                    c.bytes(1)?; // is fenced
                }
                c.skip_tagged_fields()
            })?;
        }
        _ => {
            if version >= 1 {
                c.i32()?; // throttle
            }
            if version >= 4 {
                copy_since(frame, &c, start, &mut w)?;
                let key_and_node_id = |c: &mut Cursor<'_>| {
                    c.compact_nullable()?; // key
                    c.i32().map(drop)
                };
                endpoints(frame, &mut c, &mut w, map, key_and_node_id, |c| {
                    c.i16()?; // error code
                    c.compact_nullable()?; // error message
                    c.skip_tagged_fields()
                })?;
            } else {
                c.i16()?; // error code
                if version >= 1 {
                    c.string_field(flexible)?;
                }
                c.i32()?; // node id
                copy_since(frame, &c, start, &mut w)?;
                endpoint(frame, &mut c, &mut w, map)?;
            }
        }
    }
    w.raw(frame.get(c.position()..)?);
    let size = i32::try_from(w.out.len()).ok()?;
    let mut out = size.to_be_bytes().to_vec();
    out.extend(w.out);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Map;
    impl BrokerMap for Map {
        fn gateway_for(&self, host: &[u8], port: i32) -> Option<(&str, i32)> {
            (host == b"kafka-1.internal" && port == 9092).then_some(("gateway.example.com", 19001))
        }
    }

    fn w(flexible: bool) -> Writer {
        Writer {
            out: Vec::new(),
            flexible,
        }
    }

    /// A Metadata response with the given brokers and an opaque tail, encoded for `version`.
    fn metadata(version: i16, brokers: &[(i32, &str, i32)], tail: &[u8]) -> Vec<u8> {
        let hosts: Vec<(i32, Vec<u8>, i32)> = brokers
            .iter()
            .map(|&(id, host, port)| {
                let mut h = w(version >= 9);
                h.string(host.as_bytes());
                (id, h.out, port)
            })
            .collect();
        metadata_encoded(version, &hosts, tail)
    }

    /// A Metadata response whose broker hosts are given already encoded (length and bytes).
    fn metadata_encoded(version: i16, brokers: &[(i32, Vec<u8>, i32)], tail: &[u8]) -> Vec<u8> {
        let flexible = version >= 9;
        let mut b = w(flexible);
        b.raw(&7i32.to_be_bytes());
        if flexible {
            b.raw(&[0]);
        }
        if version >= 3 {
            b.raw(&0i32.to_be_bytes());
        }
        if flexible {
            b.uvarint(brokers.len() as u64 + 1);
        } else {
            b.raw(&(brokers.len() as i32).to_be_bytes());
        }
        for (id, host, port) in brokers {
            b.raw(&id.to_be_bytes());
            b.raw(host);
            b.raw(&port.to_be_bytes());
            if version >= 1 {
                b.string(b"rack-a");
            }
            if flexible {
                b.raw(&[0]);
            }
        }
        b.raw(tail);
        let mut out = (b.out.len() as i32).to_be_bytes().to_vec();
        out.extend(b.out);
        out
    }

    #[test]
    fn metadata_brokers_are_rewritten_in_every_version() {
        for v in 0..=12 {
            let original = metadata(
                v,
                &[(1, "kafka-1.internal", 9092), (2, "kafka-2.internal", 9092)],
                b"TAIL",
            );
            let want = metadata(
                v,
                &[(1, "gateway.example.com", 19001), (2, "kafka-2.internal", 9092)],
                b"TAIL",
            );
            assert_eq!(rewrite_brokers(&original, API_METADATA, v, &Map), Some(want), "v{v}");
        }
    }

    fn find_coordinator(version: i16, host: &str, port: i32) -> Vec<u8> {
        let flexible = version >= 3;
        let mut b = w(flexible);
        b.raw(&7i32.to_be_bytes());
        if flexible {
            b.raw(&[0]);
        }
        if version >= 1 {
            b.raw(&0i32.to_be_bytes());
        }
        if version >= 4 {
            b.uvarint(2);
            b.string(b"group-a");
            b.raw(&1i32.to_be_bytes());
            b.string(host.as_bytes());
            b.raw(&port.to_be_bytes());
            b.raw(&0i16.to_be_bytes());
            b.raw(&[0, 0]); // null message, tagged fields
        } else {
            b.raw(&0i16.to_be_bytes());
            if version >= 1 {
                if flexible {
                    b.raw(&[0]);
                } else {
                    b.raw(&(-1i16).to_be_bytes());
                }
            }
            b.raw(&1i32.to_be_bytes());
            b.string(host.as_bytes());
            b.raw(&port.to_be_bytes());
        }
        if flexible {
            b.raw(&[0]);
        }
        let mut out = (b.out.len() as i32).to_be_bytes().to_vec();
        out.extend(b.out);
        out
    }

    #[test]
    fn the_coordinator_is_rewritten_in_every_version() {
        for v in 0..=6 {
            let original = find_coordinator(v, "kafka-1.internal", 9092);
            let want = find_coordinator(v, "gateway.example.com", 19001);
            assert_eq!(
                rewrite_brokers(&original, API_FIND_COORDINATOR, v, &Map),
                Some(want),
                "v{v}"
            );
        }
    }

    /// A DescribeCluster response with the given brokers, encoded for `version`.
    fn describe_cluster(version: i16, brokers: &[(i32, &str, i32)]) -> Vec<u8> {
        let mut b = w(true);
        b.raw(&7i32.to_be_bytes());
        b.raw(&[0]); // header tagged fields
        b.raw(&0i32.to_be_bytes()); // throttle
        b.raw(&0i16.to_be_bytes()); // error code
        b.raw(&[0]); // null error message
        if version >= 1 {
            b.raw(&[1]); // endpoint type: brokers
        }
        b.string(b"cluster-a");
        b.raw(&2i32.to_be_bytes()); // controller id
        b.uvarint(brokers.len() as u64 + 1);
        for &(id, host, port) in brokers {
            b.raw(&id.to_be_bytes());
            b.string(host.as_bytes());
            b.raw(&port.to_be_bytes());
            b.string(b"rack-a");
            if version >= 2 {
                b.raw(&[0]); // not fenced
            }
            b.raw(&[0]);
        }
        b.raw(&(-2147483648i32).to_be_bytes()); // authorized operations
        b.raw(&[0]);
        let mut out = (b.out.len() as i32).to_be_bytes().to_vec();
        out.extend(b.out);
        out
    }

    #[test]
    fn describe_cluster_brokers_are_rewritten_in_every_version() {
        for v in 0..=2 {
            let original = describe_cluster(v, &[(1, "kafka-1.internal", 9092), (2, "kafka-2.internal", 9092)]);
            let want = describe_cluster(v, &[(1, "gateway.example.com", 19001), (2, "kafka-2.internal", 9092)]);
            assert_eq!(
                rewrite_brokers(&original, API_DESCRIBE_CLUSTER, v, &Map),
                Some(want),
                "v{v}"
            );
        }
    }

    /// A Metadata response with one broker (node 1, port 9092) whose host is encoded as given.
    fn metadata_with_host(version: i16, host: &[u8]) -> Vec<u8> {
        metadata_encoded(version, &[(1, host.to_vec(), 9092)], b"TAIL")
    }

    /// Found by fuzzing (seeds/kafka_responses/find-coordinator-overlong-varint): an endpoint
    /// the map does not know was re-encoded, so an over-long varint length or a null host came
    /// out in other bytes; it is copied as it was. One the map knows is written afresh.
    #[test]
    fn endpoints_the_map_does_not_know_are_copied_as_encoded() {
        let overlong = [&[0x84, 0x00][..], b"k-2"].concat();
        for (v, host) in [(9, overlong.as_slice()), (9, &[0x00][..]), (1, &[0xff, 0xff][..])] {
            let original = metadata_with_host(v, host);
            assert_eq!(
                rewrite_brokers(&original, API_METADATA, v, &Map),
                Some(original.clone()),
                "v{v} {host:?}"
            );
        }
        let known = [&[0x91, 0x00][..], b"kafka-1.internal"].concat();
        assert_eq!(
            rewrite_brokers(&metadata_with_host(9, &known), API_METADATA, 9, &Map),
            Some(metadata(9, &[(1, "gateway.example.com", 19001)], b"TAIL"))
        );
    }

    #[test]
    fn truncated_responses_are_left_alone() {
        let metadata_frames = (0..=12).map(|v| {
            let frame = metadata(v, &[(1, "kafka-1.internal", 9092)], b"TAIL");
            (API_METADATA, v, frame)
        });
        let coordinator_frames = (0..=6).map(|v| {
            let frame = find_coordinator(v, "kafka-1.internal", 9092);
            (API_FIND_COORDINATOR, v, frame)
        });
        let cluster_frames = (0..=2).map(|v| {
            let frame = describe_cluster(v, &[(1, "kafka-1.internal", 9092)]);
            (API_DESCRIBE_CLUSTER, v, frame)
        });
        for (api_key, v, original) in metadata_frames.chain(coordinator_frames).chain(cluster_frames) {
            assert!(
                rewrite_brokers(&original, api_key, v, &Map).is_some(),
                "api {api_key} v{v}: the whole frame is rewritten"
            );
            for cut in 0..original.len() {
                assert_eq!(
                    rewrite_brokers(&original[..cut], api_key, v, &Map),
                    None,
                    "api {api_key} v{v} cut at {cut} of {}",
                    original.len()
                );
            }
        }
        let original = metadata(12, &[(1, "kafka-1.internal", 9092)], b"");
        assert_eq!(rewrite_brokers(&original, 1, 12, &Map), None);
    }
}
