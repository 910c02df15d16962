//! Tests of the broker address rewriter (rewrite.rs).

use super::*;

struct Map;
impl BrokerMap for Map {
    fn route(&self, _node: i32, host: &[u8], port: i32) -> Route<'_> {
        if host == b"kafka-1.internal" && port == 9092 {
            Route::To("gateway.example.com", 19001)
        } else {
            Route::Keep
        }
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
    metadata_with_controller(version, brokers, 1, tail)
}

/// A Metadata response whose controller id (v1+) is given; its cluster id (v2+) is
/// "cluster-a".
fn metadata_with_controller(version: i16, brokers: &[(i32, Vec<u8>, i32)], controller: i32, tail: &[u8]) -> Vec<u8> {
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
    if version >= 2 {
        b.string(b"cluster-a");
    }
    if version >= 1 {
        b.raw(&controller.to_be_bytes());
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

/// A cluster of node ids 0-199 at gw.example.com from port 20000, fronting `fronted`.
fn cluster(fronted: Vec<i32>) -> super::super::brokers::Cluster {
    super::super::brokers::Cluster {
        chain: "weighstation-kafka-sasl".into(),
        first_node: 0,
        last_node: 199,
        advertise_host: "gw.example.com".into(),
        advertise_first_port: 20000,
        stride: 1,
        fronted,
    }
}

fn upstream(id: i32) -> (i32, String, i32) {
    (id, format!("kafka-{id}.internal"), 9092)
}

fn gateway(id: i32) -> (i32, String, i32) {
    (id, "gw.example.com".into(), 20000 + id)
}

fn as_refs(brokers: &[(i32, String, i32)]) -> Vec<(i32, &str, i32)> {
    brokers.iter().map(|(i, h, p)| (*i, h.as_str(), *p)).collect()
}

fn metadata_of(version: i16, brokers: &[(i32, String, i32)], controller: i32) -> Vec<u8> {
    let hosts: Vec<(i32, Vec<u8>, i32)> = brokers
        .iter()
        .map(|(id, host, port)| {
            let mut h = w(version >= 9);
            h.string(host.as_bytes());
            (*id, h.out, *port)
        })
        .collect();
    metadata_with_controller(version, &hosts, controller, b"TOPICS")
}

#[test]
fn withheld_brokers_are_left_out_and_a_withheld_controller_is_replaced() {
    let map = cluster(vec![1, 2]);
    for v in 0..=12 {
        let original = metadata_of(v, &[upstream(3), upstream(1), upstream(2), upstream(250)], 3);
        let want = metadata_of(v, &[gateway(1), gateway(2)], 1);
        assert_eq!(rewrite_brokers(&original, API_METADATA, v, &map), Some(want), "v{v}");
    }
    let none = cluster(vec![]);
    let original = metadata_of(12, &[upstream(3)], 3);
    assert_eq!(
        rewrite_brokers(&original, API_METADATA, 12, &none),
        Some(metadata_of(12, &[], -1)),
        "no broker fronted: no controller"
    );
}

#[test]
fn a_count_that_shrinks_below_128_is_encoded_shorter() {
    let map = cluster((0..126).collect());
    let all: Vec<_> = (0..128).map(upstream).collect();
    let kept: Vec<_> = (0..126).map(gateway).collect();
    for v in [1, 12] {
        let original = metadata_of(v, &all, 0);
        assert_eq!(
            rewrite_brokers(&original, API_METADATA, v, &map),
            Some(metadata_of(v, &kept, 0)),
            "v{v}"
        );
    }
}

/// A DescribeCluster response with its endpoint type (v1+) and controller id.
fn describe_cluster_of(version: i16, endpoint_type: u8, controller: i32, brokers: &[(i32, String, i32)]) -> Vec<u8> {
    let mut original = describe_cluster(version, &as_refs(brokers));
    // describe_cluster writes endpoint type 1 and controller 2: put these in their place.
    let cluster_id_end = 4 + 4 + 1 + 4 + 2 + 1 + usize::from(version >= 1) + 1 + "cluster-a".len();
    if version >= 1 {
        original[4 + 4 + 1 + 4 + 2 + 1] = endpoint_type;
    }
    original[cluster_id_end..cluster_id_end + 4].copy_from_slice(&controller.to_be_bytes());
    original
}

#[test]
fn describe_cluster_leaves_out_withheld_brokers_and_every_controller() {
    let map = cluster(vec![1, 2]);
    for v in 0..=2 {
        let original = describe_cluster_of(v, 1, 3, &[upstream(1), upstream(3), upstream(2)]);
        let want = describe_cluster_of(v, 1, 1, &[gateway(1), gateway(2)]);
        assert_eq!(
            rewrite_brokers(&original, API_DESCRIBE_CLUSTER, v, &map),
            Some(want),
            "v{v}"
        );
    }
    for v in 1..=2 {
        let controllers = describe_cluster_of(v, 2, -1, &[upstream(1), upstream(2)]);
        assert_eq!(
            rewrite_brokers(&controllers, API_DESCRIBE_CLUSTER, v, &map),
            Some(describe_cluster_of(v, 2, -1, &[])),
            "v{v}: KRaft controllers are never handed out"
        );
    }
}

#[test]
fn a_coordinator_error_is_the_brokers_to_give() {
    let map = cluster(vec![]);
    for v in 0..=6 {
        let mut original = find_coordinator(v, "", -1);
        let error_at = if v >= 4 {
            4 + 4 + 1 + 4 + 1 + 1 + "group-a".len() + 4 + 1 + 4
        } else {
            4 + 4 + usize::from(v >= 3) + 4 * usize::from(v >= 1)
        };
        original[error_at..error_at + 2].copy_from_slice(&14i16.to_be_bytes()); // COORDINATOR_LOAD_IN_PROGRESS
        assert_eq!(
            rewrite_brokers(&original, API_FIND_COORDINATOR, v, &map),
            Some(original.clone()),
            "v{v}"
        );
    }
}

#[test]
fn a_withheld_coordinator_is_not_available() {
    let map = cluster(vec![2]);
    for v in 0..=6 {
        let original = find_coordinator(v, "kafka-1.internal", 9092); // node 1, not fronted
        let got = rewrite_brokers(&original, API_FIND_COORDINATOR, v, &map).expect("parses");
        let mut want = find_coordinator(v, "", -1);
        let node_at = if v >= 4 {
            4 + 4 + 1 + 4 + 1 + 1 + "group-a".len()
        } else {
            4 + 4 + usize::from(v >= 3) + 4 * usize::from(v >= 1) + 2 + usize::from(v >= 1) * if v >= 3 { 1 } else { 2 }
        };
        want[node_at..node_at + 4].copy_from_slice(&(-1i32).to_be_bytes());
        let error_at = if v >= 4 {
            node_at + 4 + 1 + 4
        } else {
            4 + 4 + usize::from(v >= 3) + 4 * usize::from(v >= 1)
        };
        want[error_at..error_at + 2].copy_from_slice(&COORDINATOR_NOT_AVAILABLE.to_be_bytes());
        assert_eq!(got, want, "v{v}");
        assert!(!got.windows(5).any(|s| s == b"kafka"), "v{v}: no broker address");
    }
}

/// A Produce v10+ response for one partition, with tagged fields: NodeEndpoints (tag 0) of
/// `endpoints` if any, and an opaque tag 5.
fn produce_with_endpoints(endpoints: Option<&[(i32, String, i32)]>) -> Vec<u8> {
    let mut b = w(true);
    b.raw(&7i32.to_be_bytes());
    b.raw(&[0]); // header tagged fields
    b.uvarint(2); // one topic
    b.string(b"orders");
    b.uvarint(2); // one partition
    b.raw(&0i32.to_be_bytes());
    b.raw(&6i16.to_be_bytes()); // NOT_LEADER_OR_FOLLOWER
    b.raw(&(-1i64).to_be_bytes());
    b.raw(&(-1i64).to_be_bytes());
    b.raw(&(-1i64).to_be_bytes());
    b.uvarint(1); // no record errors
    b.raw(&[0]); // null error message
    b.raw(&[0]); // partition tagged fields (a current leader would be here)
    b.raw(&[0]); // topic tagged fields
    b.raw(&0i32.to_be_bytes()); // throttle
    let mut tags = Vec::new();
    if let Some(eps) = endpoints {
        let mut e = w(true);
        e.uvarint(eps.len() as u64 + 1);
        for (id, host, port) in eps {
            e.raw(&id.to_be_bytes());
            e.string(host.as_bytes());
            e.raw(&port.to_be_bytes());
            e.raw(&[0]); // null rack
            e.raw(&[0]);
        }
        tags.push((0u64, e.out));
    }
    tags.push((5, b"opaque".to_vec()));
    b.uvarint(tags.len() as u64);
    for (tag, data) in tags {
        b.uvarint(tag);
        b.uvarint(data.len() as u64);
        b.raw(&data);
    }
    let mut out = (b.out.len() as i32).to_be_bytes().to_vec();
    out.extend(b.out);
    out
}

#[test]
fn produce_node_endpoints_are_rewritten_and_withheld() {
    let map = cluster(vec![2]);
    for v in 10..=12 {
        let original = produce_with_endpoints(Some(&[upstream(2), upstream(9)]));
        let want = produce_with_endpoints(Some(&[gateway(2)]));
        assert_eq!(rewrite_produce_endpoints(&original, v, &map), Some(want), "v{v}");
        let none = produce_with_endpoints(None);
        assert_eq!(
            rewrite_produce_endpoints(&none, v, &map),
            None,
            "v{v}: nothing to rewrite"
        );
        for cut in 0..original.len() {
            assert_eq!(
                rewrite_produce_endpoints(&original[..cut], v, &map),
                None,
                "v{v} cut {cut}"
            );
        }
    }
    let v9 = produce_with_endpoints(Some(&[upstream(2)]));
    assert_eq!(
        rewrite_produce_endpoints(&v9, 9, &map),
        None,
        "before v10 there are none"
    );
}

mod property {
    use super::*;
    use proptest::prelude::*;

    /// Reads every endpoint a rewritten response names: none may be a broker's own.
    struct Recorder(std::cell::RefCell<Vec<(i32, Vec<u8>, i32)>>);
    impl BrokerMap for Recorder {
        fn route(&self, node: i32, host: &[u8], port: i32) -> Route<'_> {
            self.0.borrow_mut().push((node, host.to_vec(), port));
            Route::Keep
        }
    }

    fn brokers() -> impl Strategy<Value = Vec<(i32, String, i32)>> {
        prop::collection::vec(
            (
                prop_oneof![0..8i32, 195..205i32, Just(-1), Just(i32::MIN), Just(i32::MAX)],
                "[a-z0-9.-]{0,40}",
                any::<i32>(),
            )
                .prop_map(|(id, host, port)| (id, format!("UPSTREAM{host}"), port)),
            0..40,
        )
    }

    proptest! {
        /// Cluster-shaped responses of any broker ids, hosts and ports: what comes out parses,
        /// and every address in it is the gateway's for a fronted node id.
        #[test]
        fn no_rewritten_response_holds_an_upstream_address(
            list in brokers(),
            fronted in prop::collection::vec(0..8i32, 0..8),
            controller in prop_oneof![0..8i32, Just(-1), Just(300)],
            version in 0..=12i16,
        ) {
            let mut fronted = fronted;
            fronted.sort_unstable();
            fronted.dedup();
            let map = cluster(fronted.clone());
            let frames = [
                (API_METADATA, version, metadata_of(version, &list, controller)),
                (API_DESCRIBE_CLUSTER, version % 3, describe_cluster_of(version % 3, 1, controller, &list)),
            ];
            for (api_key, v, frame) in frames {
                let out = rewrite_brokers(&frame, api_key, v, &map).expect("a well-formed response parses");
                let seen = Recorder(Default::default());
                rewrite_brokers(&out, api_key, v, &seen).expect("the rewritten response parses");
                for (node, host, port) in seen.0.into_inner() {
                    prop_assert!(fronted.contains(&node), "node {} handed out", node);
                    prop_assert_eq!((host.as_slice(), port), (&b"gw.example.com"[..], 20000 + node));
                }
            }
            for (_, host, port) in list.iter().take(1) {
                // find_coordinator names node 1.
                let frame = find_coordinator(version % 7, host, *port);
                let out = rewrite_brokers(&frame, API_FIND_COORDINATOR, version % 7, &map).expect("parses");
                prop_assert!(!out.windows(3).any(|s| s == b"UPS"), "coordinator address leaked");
            }
            if version >= 10 {
                let frame = produce_with_endpoints(Some(&list));
                if let Some(out) = rewrite_produce_endpoints(&frame, version, &map) {
                    prop_assert!(!out.windows(3).any(|s| s == b"UPS"), "node endpoint leaked");
                } else {
                    prop_assert!(false, "a produce response with node endpoints parses");
                }
            }
        }
    }
}

#[test]
fn negative_node_ids_are_never_remapped() {
    let map = cluster(vec![1, 2]);
    for v in 1..=12 {
        let original = metadata_of(v, &[upstream(1), upstream(2)], -1);
        assert_eq!(
            rewrite_brokers(&original, API_METADATA, v, &map),
            Some(metadata_of(v, &[gateway(1), gateway(2)], -1)),
            "v{v}: no controller stays none"
        );
    }
    for v in 0..=2 {
        let original = describe_cluster_of(v, 1, -1, &[upstream(1)]);
        assert_eq!(
            rewrite_brokers(&original, API_DESCRIBE_CLUSTER, v, &map),
            Some(describe_cluster_of(v, 1, -1, &[gateway(1)])),
            "v{v}"
        );
    }
}
