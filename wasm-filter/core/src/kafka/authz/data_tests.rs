//! Data requests, Metadata and Fetch as clients encode them, decided against a tenant's lists;
//! refusals read back field by field as a client reads them.

use super::admin::{Verdict, GROUP_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED, TOPIC_AUTHORIZATION_FAILED};
use super::admin_tests::{refusal, Req, Resp};
use super::apis::{api_of, APIS};
use super::data::{decide_data, TRANSACTIONAL_ID_AUTHORIZATION_FAILED};
use super::fetch::decide_fetch;
use super::metadata::{filter_metadata, metadata_request};
use super::Grants;
use crate::kafka::rewrite::COORDINATOR_NOT_AVAILABLE;
use proptest::prelude::*;

fn acme() -> Grants {
    let l = |p: &str| Some(vec![p.to_string()]);
    Grants {
        produce: l("acme.*"),
        consume: l("acme.*"),
        groups: l("acme-*"),
        transactional_ids: l("acme-tx-*"),
        create_topics: l("acme.*"),
        ..Grants::default()
    }
}

fn data(key: i16, version: i16, body: &[u8], grants: &Grants) -> Verdict {
    decide_data(api_of(key).unwrap(), version, 7, body, "acme", grants)
}

/// A body that starts with a name and goes on with whatever the version has (not read).
fn named(name: &str, flexible: bool) -> Vec<u8> {
    Req::new(flexible).string(name).raw(&[0; 24]).out
}

#[test]
fn a_tenant_without_lists_passes_every_data_request_unread() {
    for key in [8, 9, 10, 11, 12, 13, 14, 19, 22, 24, 25, 26, 28, 37, 68] {
        assert_eq!(
            data(key, 0, b"garbage", &Grants::default()),
            Verdict::Forward,
            "key {key}"
        );
    }
}

#[test]
fn group_membership_is_refused_outside_the_groups_list_in_every_version() {
    for (key, max) in [(11i16, 9i16), (12, 4), (13, 5), (14, 5), (68, 1)] {
        for version in 0..=max {
            let f = api_of(key).unwrap().flexible(version);
            assert_eq!(data(key, version, &named("acme-billing", f), &acme()), Verdict::Forward);
            let (response, denied, of) = refusal(data(key, version, &named("globex-billing", f), &acme()));
            assert_eq!((denied.as_str(), of), ("globex-billing", 1));
            let mut r = Resp::new(&response, 7, f);
            match key {
                11 => {
                    if version >= 2 {
                        assert_eq!(r.i32(), 0);
                    }
                    assert_eq!((r.i16(), r.i32()), (GROUP_AUTHORIZATION_FAILED, -1));
                    if version >= 7 {
                        assert_eq!((r.nullable(), r.nullable()), (None, None));
                    } else {
                        assert_eq!(r.string(), "");
                    }
                    assert_eq!(r.string(), "", "leader");
                    if version >= 9 {
                        r.skip(1);
                    }
                    assert_eq!((r.string(), r.array()), (String::new(), 0));
                }
                68 => {
                    assert_eq!((r.i32(), r.i16()), (0, GROUP_AUTHORIZATION_FAILED));
                    assert!(r.nullable().unwrap().contains("spec.permissions.kafka.groups"));
                    assert_eq!((r.nullable(), r.i32(), r.i32()), (None, -1, 0));
                    r.skip(1); // null assignment
                }
                _ => {
                    if version >= 1 {
                        assert_eq!(r.i32(), 0);
                    }
                    assert_eq!(r.i16(), GROUP_AUTHORIZATION_FAILED);
                    if key == 13 && version >= 3 {
                        assert_eq!(r.array(), 0);
                    }
                    if key == 14 {
                        if version >= 5 {
                            assert_eq!((r.nullable(), r.nullable()), (None, None));
                        }
                        assert_eq!(r.array(), 0, "empty assignment");
                    }
                }
            }
            r.end();
        }
    }
}

#[test]
fn find_coordinator_refuses_groups_and_transactional_ids_not_listed() {
    for version in 0..=3i16 {
        let f = version >= 3;
        for (key, key_type, error) in [
            ("globex-billing", 0u8, GROUP_AUTHORIZATION_FAILED),
            ("globex-tx-1", 1, TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ] {
            if version == 0 && key_type == 1 {
                continue;
            }
            let body = |k: &str| {
                let r = Req::new(f).string(k);
                if version >= 1 { r.raw(&[key_type]) } else { r }.tags().out
            };
            let own = if key_type == 0 { "acme-billing" } else { "acme-tx-1" };
            assert_eq!(data(10, version, &body(own), &acme()), Verdict::Forward);
            let (response, denied, _) = refusal(data(10, version, &body(key), &acme()));
            assert_eq!(denied, key);
            let mut r = Resp::new(&response, 7, f);
            if version >= 1 {
                assert_eq!(r.i32(), 0);
            }
            assert_eq!(r.i16(), error);
            if version >= 1 {
                assert!(r.nullable().unwrap().contains("may not use"));
            }
            assert_eq!((r.i32(), r.string(), r.i32()), (-1, String::new(), -1));
            r.end();
        }
    }
    // v4+: a batch, each key answered; a granted one beside a refused one is retried.
    let body = Req::new(true)
        .raw(&[0])
        .array(2)
        .string("acme-a")
        .string("globex-b")
        .tags()
        .out;
    let (response, denied, of) = refusal(data(10, 4, &body, &acme()));
    assert_eq!((denied.as_str(), of), ("globex-b", 1));
    let mut r = Resp::new(&response, 7, true);
    assert_eq!((r.i32(), r.array()), (0, 2));
    for (key, error) in [
        ("acme-a", COORDINATOR_NOT_AVAILABLE),
        ("globex-b", GROUP_AUTHORIZATION_FAILED),
    ] {
        assert_eq!(
            (r.string(), r.i32(), r.string(), r.i32(), r.i16()),
            (key.into(), -1, String::new(), -1, error)
        );
        r.nullable();
        r.tags();
    }
    r.end();
}

#[test]
fn transactions_are_refused_outside_the_transactional_ids_and_their_topics_outside_produce() {
    // InitProducerId: null (idempotence, no transaction) passes.
    let init = |id: Option<&str>| {
        let r = Req::new(true);
        match id {
            Some(id) => r.string(id),
            None => r.raw(&[0]),
        }
        .raw(&[0, 0, 0, 100])
        .tags()
        .out
    };
    assert_eq!(data(22, 4, &init(None), &acme()), Verdict::Forward);
    assert_eq!(data(22, 4, &init(Some("acme-tx-1")), &acme()), Verdict::Forward);
    let (response, _, _) = refusal(data(22, 4, &init(Some("globex-tx-1")), &acme()));
    let mut r = Resp::new(&response, 7, true);
    assert_eq!((r.i32(), r.i16()), (0, TRANSACTIONAL_ID_AUTHORIZATION_FAILED));
    r.skip(10);
    r.end();

    // AddPartitionsToTxn v3: the id granted, one topic not: refused per partition.
    let add = Req::new(true)
        .string("acme-tx-1")
        .raw(&[0; 10])
        .array(2)
        .string("acme.orders")
        .array(1)
        .raw(&0i32.to_be_bytes())
        .tags()
        .string("globex.orders")
        .array(2)
        .raw(&1i32.to_be_bytes())
        .raw(&2i32.to_be_bytes())
        .tags()
        .tags()
        .out;
    let (response, denied, _) = refusal(data(24, 3, &add, &acme()));
    assert_eq!(denied, "globex.orders");
    let mut r = Resp::new(&response, 7, true);
    assert_eq!((r.i32(), r.array()), (0, 2));
    for (topic, partitions, error) in [
        ("acme.orders", vec![0], OPERATION_NOT_ATTEMPTED),
        ("globex.orders", vec![1, 2], TOPIC_AUTHORIZATION_FAILED),
    ] {
        assert_eq!((r.string(), r.array()), (topic.to_string(), partitions.len()));
        for p in partitions {
            assert_eq!((r.i32(), r.i16()), (p, error));
            r.tags();
        }
        r.tags();
    }
    r.end();

    // EndTxn and AddOffsetsToTxn: one error.
    let end = Req::new(true).string("globex-tx-1").raw(&[0; 11]).tags().out;
    let (response, _, _) = refusal(data(26, 3, &end, &acme()));
    let mut r = Resp::new(&response, 7, true);
    assert_eq!((r.i32(), r.i16()), (0, TRANSACTIONAL_ID_AUTHORIZATION_FAILED));
    r.end();
    let offsets = Req::new(false).string("acme-tx-1").raw(&[0; 10]).string("globex-g").out;
    let (response, denied, _) = refusal(data(25, 2, &offsets, &acme()));
    assert_eq!(denied, "globex-g");
    let mut r = Resp::new(&response, 7, false);
    assert_eq!((r.i32(), r.i16()), (0, GROUP_AUTHORIZATION_FAILED));
    r.end();
}

#[test]
fn offset_commits_of_a_group_not_listed_are_refused_per_partition() {
    let body = Req::new(true)
        .string("globex-g")
        .raw(&5i32.to_be_bytes())
        .string("member")
        .raw(&[0]) // null group instance
        .array(1)
        .string("acme.orders")
        .array(1)
        .raw(&3i32.to_be_bytes())
        .raw(&[0; 12])
        .raw(&[0]) // null metadata
        .tags()
        .tags()
        .tags()
        .out;
    let (response, _, _) = refusal(data(8, 8, &body, &acme()));
    let mut r = Resp::new(&response, 7, true);
    assert_eq!(
        (r.i32(), r.array(), r.string(), r.array()),
        (0, 1, "acme.orders".into(), 1)
    );
    assert_eq!((r.i32(), r.i16()), (3, GROUP_AUTHORIZATION_FAILED));
    r.tags();
    r.tags();
    r.end();
}

#[test]
fn topic_creation_is_refused_outside_create_topics_per_topic() {
    for version in [4i16, 7] {
        let f = version >= 5;
        let topic = |r: Req, name: &str| {
            r.string(name)
                .raw(&1i32.to_be_bytes())
                .raw(&1i16.to_be_bytes())
                .array(0)
                .array(0)
                .tags()
        };
        let body = topic(topic(Req::new(f).array(2), "acme.new"), "globex.new")
            .raw(&30_000i32.to_be_bytes())
            .raw(&[0])
            .tags()
            .out;
        let (response, denied, of) = refusal(data(19, version, &body, &acme()));
        assert_eq!((denied.as_str(), of), ("globex.new", 1));
        let mut r = Resp::new(&response, 7, f);
        assert_eq!((r.i32(), r.array()), (0, 2));
        for (name, error) in [
            ("acme.new", OPERATION_NOT_ATTEMPTED),
            ("globex.new", TOPIC_AUTHORIZATION_FAILED),
        ] {
            assert_eq!(r.string(), name);
            if version >= 7 {
                r.skip(16);
            }
            assert_eq!(r.i16(), error);
            r.nullable();
            if version >= 5 {
                assert_eq!((r.i32(), r.i16()), (-1, -1));
                r.skip(1); // null configs
            }
            r.tags();
        }
        r.end();
    }
}

/// A Metadata response of `version` with these topics (each with one partition led by node 1).
fn metadata_response(version: i16, topics: &[&str]) -> Vec<u8> {
    let f = version >= 9;
    let mut r = Req::new(f).raw(&7i32.to_be_bytes()).tags();
    if version >= 3 {
        r = r.raw(&0i32.to_be_bytes());
    }
    r = r
        .array(1)
        .raw(&1i32.to_be_bytes())
        .string("broker")
        .raw(&9092i32.to_be_bytes());
    if version >= 1 {
        r = r.raw(if f { &[0][..] } else { &[0xff, 0xff][..] }); // null rack
    }
    r = r.tags();
    if version >= 2 {
        r = r.string("cluster");
    }
    if version >= 1 {
        r = r.raw(&1i32.to_be_bytes());
    }
    r = r.array(topics.len());
    for t in topics {
        r = r.raw(&0i16.to_be_bytes()).string(t);
        if version >= 10 {
            r = r.raw(&[9; 16]);
        }
        if version >= 1 {
            r = r.raw(&[0]);
        }
        r = r
            .array(1)
            .raw(&0i16.to_be_bytes())
            .raw(&0i32.to_be_bytes())
            .raw(&1i32.to_be_bytes());
        if version >= 7 {
            r = r.raw(&0i32.to_be_bytes());
        }
        for _ in 0..if version >= 5 { 3 } else { 2 } {
            r = r.array(1).raw(&1i32.to_be_bytes());
        }
        r = r.tags();
        if version >= 8 {
            r = r.raw(&0i32.to_be_bytes());
        }
        r = r.tags();
    }
    if (8..=10).contains(&version) {
        r = r.raw(&0i32.to_be_bytes());
    }
    let body = r.tags().out;
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend(body);
    frame
}

#[test]
fn metadata_hides_topics_the_tenant_may_not_see_and_refuses_those_it_names() {
    for version in 0..=12i16 {
        let all = metadata_response(version, &["acme.orders", "globex.orders", "acme.audit"]);
        assert_eq!(
            filter_metadata(&all, version, true, &Grants::default()),
            None,
            "no lists: as it is"
        );
        let filtered = filter_metadata(&all, version, true, &acme()).unwrap();
        assert_eq!(
            filtered.frame,
            metadata_response(version, &["acme.orders", "acme.audit"]),
            "v{version}: left out of every topic"
        );
        assert!(filtered.refused.is_empty());
        let named = filter_metadata(&all, version, false, &acme()).unwrap();
        assert_eq!(named.refused, vec![b"globex.orders".to_vec()]);
        // The refused topic reads back as an error entry with no partitions.
        let f = version >= 9;
        let mut r = Resp::new(&named.frame, 7, f);
        if version >= 3 {
            r.i32();
        }
        assert_eq!(r.array(), 1);
        r.i32();
        r.string();
        r.i32();
        if version >= 1 {
            r.nullable();
        }
        r.tags();
        if version >= 2 {
            r.nullable();
        }
        if version >= 1 {
            r.i32();
        }
        assert_eq!(r.array(), 3);
        let mut seen = Vec::new();
        for _ in 0..3 {
            let error = r.i16();
            let name = r.string();
            if version >= 10 {
                r.skip(16);
            }
            if version >= 1 {
                r.skip(1);
            }
            let partitions = r.array();
            for _ in 0..partitions {
                r.skip(10);
                if version >= 7 {
                    r.skip(4);
                }
                for _ in 0..if version >= 5 { 3 } else { 2 } {
                    let n = r.array();
                    r.skip(4 * n);
                }
                r.tags();
            }
            if version >= 8 {
                r.i32();
            }
            r.tags();
            seen.push((name, error, partitions));
        }
        assert_eq!(
            seen[1],
            ("globex.orders".into(), TOPIC_AUTHORIZATION_FAILED, 0),
            "v{version}"
        );
        assert_eq!(seen[0].1, 0);
        if (8..=10).contains(&version) {
            r.i32();
        }
        r.end();
    }
}

#[test]
fn metadata_requests_say_whether_all_topics_and_lose_auto_creation_outside_the_lists() {
    for version in 4..=12i16 {
        let f = version >= 9;
        let request = |topics: Option<&[&str]>, auto: u8| {
            let mut r = Req::new(f);
            match topics {
                None if f => r = r.raw(&[0]),
                None => r = r.raw(&(-1i32).to_be_bytes()),
                Some(ts) => {
                    r = r.array(ts.len());
                    for t in ts {
                        if version >= 10 {
                            r = r.raw(&[0; 16]);
                        }
                        r = r.string(t).tags();
                    }
                }
            }
            r = r.raw(&[auto]);
            if (8..=10).contains(&version) {
                r = r.raw(&[0]);
            }
            if version >= 8 {
                r = r.raw(&[0]);
            }
            r.tags().out
        };
        let all = metadata_request(&request(None, 1), version, &acme()).unwrap();
        assert!(all.all_topics && all.clear_auto_create.is_none());
        let own = metadata_request(&request(Some(&["acme.new"]), 1), version, &acme()).unwrap();
        assert!(!own.all_topics && own.clear_auto_create.is_none(), "its own: created");
        let body = request(Some(&["acme.new", "globex.new"]), 1);
        let other = metadata_request(&body, version, &acme()).unwrap();
        let at = other.clear_auto_create.expect("another's: not created");
        assert_eq!(body[at], 1);
        let off = metadata_request(&request(Some(&["globex.new"]), 0), version, &acme()).unwrap();
        assert_eq!(off.clear_auto_create, None, "not asked: nothing to clear");
    }
}

#[test]
fn a_fetch_of_a_topic_not_consumable_is_answered_per_partition() {
    for version in [4i16, 7, 11, 12] {
        let f = version >= 12;
        let mut r = Req::new(f).raw(&[0; 12]).raw(&1_000_000i32.to_be_bytes()).raw(&[0]);
        if version >= 7 {
            r = r.raw(&[0; 8]);
        }
        r = r.array(2);
        for (topic, p) in [("acme.orders", 0i32), ("globex.orders", 4)] {
            r = r.string(topic).array(1).raw(&p.to_be_bytes());
            if version >= 9 {
                r = r.raw(&[0; 4]);
            }
            r = r.raw(&[0; 8]);
            if version >= 12 {
                r = r.raw(&[0; 4]);
            }
            if version >= 5 {
                r = r.raw(&[0; 8]);
            }
            r = r.raw(&1_000_000i32.to_be_bytes()).tags().tags();
        }
        let body = r.array(0).string("").tags().out; // forgotten topics, rack id: not read
        let mut own = acme();
        own.consume = Some(vec!["*".into()]);
        assert_eq!(decide_fetch(version, 7, &body, &own), Verdict::Forward);
        let (response, denied, of) = refusal(decide_fetch(version, 7, &body, &acme()));
        assert_eq!((denied.as_str(), of), ("globex.orders", 1));
        let mut r = Resp::new(&response, 7, f);
        r.i32();
        if version >= 7 {
            assert_eq!((r.i16(), r.i32()), (0, 0), "no error, the session closed");
        }
        assert_eq!(r.array(), 2);
        for (topic, p, error) in [("acme.orders", 0, 0), ("globex.orders", 4, TOPIC_AUTHORIZATION_FAILED)] {
            assert_eq!((r.string(), r.array(), r.i32(), r.i16()), (topic.into(), 1, p, error));
            r.skip(16);
            if version >= 5 {
                r.skip(8);
            }
            r.skip(if f { 1 } else { 4 });
            if version >= 11 {
                assert_eq!(r.i32(), -1);
            }
            assert_eq!(r.array(), 0, "empty records");
            r.tags();
            r.tags();
        }
        r.end();
    }
}

proptest! {
    #[test]
    fn hostile_data_bodies_never_panic(row in 0usize..APIS.len(),
                                       version in 0i16..13,
                                       body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let api = &APIS[row];
        let _ = decide_data(api, version, 1, &body, "t", &acme());
        let _ = metadata_request(&body, version, &acme());
        let _ = filter_metadata(&body, version, false, &acme());
        let _ = decide_fetch(version, 1, &body, &acme());
    }
}

/// A DescribeTopicPartitions v0 response with these topics (one partition each).
fn topic_partitions_response(topics: &[&str]) -> Vec<u8> {
    let mut r = Req::new(true)
        .raw(&7i32.to_be_bytes())
        .tags()
        .raw(&0i32.to_be_bytes())
        .array(topics.len());
    for t in topics {
        r = r
            .raw(&0i16.to_be_bytes())
            .string(t)
            .raw(&[9; 16])
            .raw(&[0])
            .array(1)
            .raw(&[0; 14]);
        r = r.array(1).raw(&1i32.to_be_bytes()).array(1).raw(&1i32.to_be_bytes());
        r = r.raw(&[0, 0]).array(0).tags(); // null ELR and last known ELR, no offline replicas
        r = r.raw(&0i32.to_be_bytes()).tags();
    }
    let body = r.raw(&[0xff]).tags().out; // null cursor
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend(body);
    frame
}

#[test]
fn describe_topic_partitions_is_filtered_as_metadata_is() {
    use super::metadata::{describes_all_topics, filter_topic_partitions};
    let both = topic_partitions_response(&["acme.orders", "globex.orders"]);
    assert_eq!(filter_topic_partitions(&both, true, &Grants::default()), None);
    let all = filter_topic_partitions(&both, true, &acme()).unwrap();
    assert_eq!(all.frame, topic_partitions_response(&["acme.orders"]));
    let named = filter_topic_partitions(&both, false, &acme()).unwrap();
    assert_eq!(named.refused, vec![b"globex.orders".to_vec()]);
    assert_eq!(
        filter_topic_partitions(&named.frame, false, &acme()).unwrap().frame,
        named.frame
    );
    assert_eq!(describes_all_topics(&Req::new(true).array(0).out), Some(true));
    assert_eq!(
        describes_all_topics(&Req::new(true).array(1).string("x").tags().out),
        Some(false)
    );
}
