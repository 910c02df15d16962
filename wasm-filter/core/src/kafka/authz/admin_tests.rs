//! Admin requests as clients encode them, in every version the gateway answers, decided
//! against grants; refusals read back field by field as a client reads them.

use super::admin::*;
use super::apis::{api_of, ClusterOp};
use super::{ClusterOps, Grants};
use crate::kafka::cursor::Cursor;
use crate::kafka::encode::{array_len, string};
use proptest::prelude::*;

pub(super) struct Req {
    pub(super) out: Vec<u8>,
    flexible: bool,
}

impl Req {
    pub(super) fn new(flexible: bool) -> Req {
        Req {
            out: Vec::new(),
            flexible,
        }
    }
    pub(super) fn array(mut self, n: usize) -> Req {
        array_len(&mut self.out, n, self.flexible);
        self
    }
    pub(super) fn string(mut self, s: &str) -> Req {
        string(&mut self.out, s.as_bytes(), self.flexible);
        self
    }
    pub(super) fn raw(mut self, b: &[u8]) -> Req {
        self.out.extend_from_slice(b);
        self
    }
    pub(super) fn tags(mut self) -> Req {
        if self.flexible {
            self.out.push(0);
        }
        self
    }
}

/// Reads a response back: header, then fields as the test asks for them.
pub(super) struct Resp<'a> {
    c: Cursor<'a>,
    flexible: bool,
}

impl<'a> Resp<'a> {
    pub(super) fn new(frame: &'a [u8], corr: i32, flexible: bool) -> Resp<'a> {
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(size + 4, frame.len(), "the size prefix covers the response");
        let mut c = Cursor::new(&frame[4..]);
        assert_eq!(c.i32(), Some(corr));
        if flexible {
            c.skip_tagged_fields().unwrap();
        }
        Resp { c, flexible }
    }
    pub(super) fn i16(&mut self) -> i16 {
        self.c.i16().unwrap()
    }
    pub(super) fn i32(&mut self) -> i32 {
        self.c.i32().unwrap()
    }
    pub(super) fn skip(&mut self, n: usize) {
        self.c.bytes(n).unwrap();
    }
    pub(super) fn string(&mut self) -> String {
        String::from_utf8(self.c.string_field(self.flexible).unwrap().unwrap().to_vec()).unwrap()
    }
    pub(super) fn nullable(&mut self) -> Option<String> {
        self.c
            .string_field(self.flexible)
            .unwrap()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
    }
    pub(super) fn array(&mut self) -> usize {
        self.c.array_len(self.flexible).unwrap()
    }
    pub(super) fn tags(&mut self) {
        if self.flexible {
            self.c.skip_tagged_fields().unwrap();
        }
    }
    pub(super) fn end(mut self) {
        self.tags();
        assert_eq!(self.c.bytes(1), None, "nothing after the response");
    }
}

fn grants() -> Grants {
    Grants {
        delete_topics: vec!["acme.*".into()],
        alter_topic_configs: vec!["acme.*".into()],
        delete_groups: vec!["acme-*".into()],
        cluster: ClusterOps::default(),
        ..Grants::default()
    }
}

fn decide_key(key: i16, version: i16, body: &[u8], grants: &Grants) -> Verdict {
    decide(api_of(key).unwrap(), version, 7, body, "acme", grants)
}

pub(super) fn refusal(v: Verdict) -> (Vec<u8>, String, usize) {
    match v {
        Verdict::Refuse { response, denied, of } => (response, String::from_utf8(denied).unwrap(), of),
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn delete_topics_is_refused_per_topic_in_every_version() {
    for version in 1..=5 {
        let flexible = version >= 4;
        let body = |names: &[&str]| {
            let mut r = Req::new(flexible).array(names.len());
            for n in names {
                r = r.string(n);
            }
            r.raw(&30_000i32.to_be_bytes()).tags().out
        };
        assert_eq!(
            decide_key(20, version, &body(&["acme.orders"]), &grants()),
            Verdict::Forward
        );
        let (response, denied, of) = refusal(decide_key(
            20,
            version,
            &body(&["acme.orders", "globex.orders"]),
            &grants(),
        ));
        assert_eq!((denied.as_str(), of), ("globex.orders", 1));
        let mut r = Resp::new(&response, 7, flexible);
        if version >= 1 {
            assert_eq!(r.i32(), 0, "throttle");
        }
        assert_eq!(r.array(), 2);
        for (name, error) in [
            ("acme.orders", OPERATION_NOT_ATTEMPTED),
            ("globex.orders", TOPIC_AUTHORIZATION_FAILED),
        ] {
            assert_eq!(r.string(), name);
            assert_eq!(r.i16(), error, "v{version} {name}");
            if version >= 5 {
                let message = r.nullable().unwrap();
                assert!(message.starts_with("weighstation: "), "{message}");
                if error == TOPIC_AUTHORIZATION_FAILED {
                    assert!(message.contains("spec.permissions.kafka.deleteTopics"), "{message}");
                }
            }
            r.tags();
        }
        r.end();
    }
}

#[test]
fn delete_topics_by_id_is_above_what_the_gateway_advertises() {
    assert!(matches!(decide_key(20, 6, &[0], &grants()), Verdict::Close(_)));
}

#[test]
fn delete_records_answers_each_partition() {
    for version in 0..=2 {
        let flexible = version >= 2;
        let mut body = Req::new(flexible).array(1).string("globex.orders").array(2);
        for p in [0i32, 3] {
            body = body.raw(&p.to_be_bytes()).raw(&5i64.to_be_bytes()).tags();
        }
        let body = body.tags().raw(&1000i32.to_be_bytes()).tags().out;
        let (response, denied, _) = refusal(decide_key(21, version, &body, &grants()));
        assert_eq!(denied, "globex.orders");
        let mut r = Resp::new(&response, 7, flexible);
        assert_eq!(r.i32(), 0);
        assert_eq!(r.array(), 1);
        assert_eq!(r.string(), "globex.orders");
        assert_eq!(r.array(), 2);
        for p in [0, 3] {
            assert_eq!(r.i32(), p);
            r.skip(8);
            assert_eq!(r.i16(), TOPIC_AUTHORIZATION_FAILED);
            r.tags();
        }
        r.tags();
        r.end();
    }
}

#[test]
fn groups_are_deleted_only_where_granted() {
    for version in 0..=2 {
        let flexible = version >= 2;
        let body = Req::new(flexible)
            .array(2)
            .string("acme-billing")
            .string("globex-billing")
            .tags()
            .out;
        let (response, denied, of) = refusal(decide_key(42, version, &body, &grants()));
        assert_eq!((denied.as_str(), of), ("globex-billing", 1));
        let mut r = Resp::new(&response, 7, flexible);
        assert_eq!(r.i32(), 0);
        assert_eq!(r.array(), 2);
        for (g, e) in [
            ("acme-billing", OPERATION_NOT_ATTEMPTED),
            ("globex-billing", GROUP_AUTHORIZATION_FAILED),
        ] {
            assert_eq!(r.string(), g);
            assert_eq!(r.i16(), e);
            r.tags();
        }
        r.end();
    }
    let offsets = Req::new(false).string("globex-billing").array(0).out;
    let (response, _, _) = refusal(decide_key(47, 0, &offsets, &grants()));
    let mut r = Resp::new(&response, 7, false);
    assert_eq!(r.i16(), GROUP_AUTHORIZATION_FAILED);
    assert_eq!(r.i32(), 0);
    assert_eq!(r.array(), 0);
    r.end();
    let own = Req::new(false).string("acme-billing").array(0).out;
    assert_eq!(decide_key(47, 0, &own, &grants()), Verdict::Forward);
}

#[test]
fn topic_configs_need_the_topic_and_broker_configs_the_cluster_grant() {
    for (key, versions) in [(33i16, 0..=2i16), (44, 0..=1)] {
        for version in versions {
            let flexible = if key == 33 { version >= 2 } else { version >= 1 };
            let resource = |r: Req, kind: u8, name: &str| {
                let mut r = r.raw(&[kind]).string(name).array(1).string("retention.ms");
                if key == 44 {
                    r = r.raw(&[0]);
                }
                r.string("1").tags().tags()
            };
            let body = |resources: &[(u8, &str)]| {
                let mut r = Req::new(flexible).array(resources.len());
                for (kind, name) in resources {
                    r = resource(r, *kind, name);
                }
                r.raw(&[0]).tags().out
            };
            assert_eq!(
                decide_key(key, version, &body(&[(2, "acme.orders")]), &grants()),
                Verdict::Forward
            );
            let (response, denied, of) = refusal(decide_key(
                key,
                version,
                &body(&[(2, "globex.orders"), (4, "1")]),
                &grants(),
            ));
            assert_eq!((denied.as_str(), of), ("globex.orders", 2));
            let mut r = Resp::new(&response, 7, flexible);
            assert_eq!(r.i32(), 0);
            assert_eq!(r.array(), 2);
            for (error, kind, name) in [
                (TOPIC_AUTHORIZATION_FAILED, 2u8, "globex.orders"),
                (CLUSTER_AUTHORIZATION_FAILED, 4, "1"),
            ] {
                assert_eq!(r.i16(), error);
                assert!(r.nullable().unwrap().starts_with("weighstation: tenant acme may not"));
                assert_eq!(r.c.bytes(1).unwrap()[0], kind);
                assert_eq!(r.string(), name);
                r.tags();
            }
            r.end();
            let mut broker = grants();
            broker.cluster = ClusterOps::of(&[ClusterOp::AlterBrokerConfigs]);
            assert_eq!(decide_key(key, version, &body(&[(4, "1")]), &broker), Verdict::Forward);
        }
    }
}

#[test]
fn client_quotas_are_refused_naming_limitpolicy() {
    for version in 0..=1 {
        let flexible = version >= 1;
        let body = Req::new(flexible)
            .array(1)
            .array(1)
            .string("client-id")
            .raw(if flexible { &[0] } else { &[0xff, 0xff] }) // default entity (null name)
            .tags()
            .array(1)
            .string("producer_byte_rate")
            .raw(&1f64.to_be_bytes())
            .raw(&[0])
            .tags()
            .tags()
            .raw(&[0])
            .tags()
            .out;
        let (response, denied, of) = refusal(decide_key(49, version, &body, &grants()));
        assert_eq!((denied.as_str(), of), ("AlterClientQuotas", 1));
        let mut r = Resp::new(&response, 7, flexible);
        assert_eq!(r.i32(), 0);
        assert_eq!(r.array(), 1);
        assert_eq!(r.i16(), CLUSTER_AUTHORIZATION_FAILED);
        let message = r.nullable().unwrap();
        assert!(message.contains("LimitPolicy"), "{message}");
        assert_eq!(r.array(), 1);
        assert_eq!(r.string(), "client-id");
        assert_eq!(r.nullable(), None);
        r.tags();
        r.tags();
        r.end();
        let mut granted = grants();
        granted.cluster = ClusterOps::of(&[ClusterOp::AlterClientQuotas]);
        assert_eq!(decide_key(49, version, &body, &granted), Verdict::Forward);
    }
}

#[test]
fn acls_are_refused_one_result_per_entry() {
    for (key, version) in [(30i16, 1i16), (30, 2), (30, 3), (31, 1), (31, 2), (31, 3)] {
        let flexible = version >= 2;
        let mut body = Req::new(flexible).array(2);
        for _ in 0..2 {
            body = body
                .raw(&[2])
                .string("orders")
                .raw(&[3])
                .string("User:x")
                .string("*")
                .raw(&[3, 3])
                .tags();
        }
        let (response, _, of) = refusal(decide_key(key, version, &body.tags().out, &grants()));
        assert_eq!(of, 2);
        let mut r = Resp::new(&response, 7, flexible);
        assert_eq!(r.i32(), 0);
        assert_eq!(r.array(), 2);
        for _ in 0..2 {
            assert_eq!(r.i16(), CLUSTER_AUTHORIZATION_FAILED);
            r.nullable().unwrap();
            if key == 31 {
                assert_eq!(r.array(), 0);
            }
            r.tags();
        }
        r.end();
    }
}

#[test]
fn whole_request_cluster_operations_carry_one_error() {
    // ElectLeaders v1+, AlterPartitionReassignments, UpdateFeatures, UnregisterBroker.
    for (key, version) in [(43i16, 1i16), (43, 2), (45, 0), (57, 0), (57, 1), (57, 2), (64, 0)] {
        let (response, _, _) = refusal(decide_key(key, version, &[], &grants()));
        let flexible = key != 43 || version >= 2;
        let mut r = Resp::new(&response, 7, flexible);
        assert_eq!(r.i32(), 0);
        assert_eq!(r.i16(), CLUSTER_AUTHORIZATION_FAILED, "key {key} v{version}");
        if key != 43 {
            assert!(r.nullable().unwrap().contains("spec.permissions.kafka.cluster"));
        }
        if key == 43 || key == 45 || (key == 57 && version <= 1) {
            assert_eq!(r.array(), 0);
        }
        r.end();
    }
}

#[test]
fn elect_leaders_v0_answers_each_partition() {
    let body = Req::new(false)
        .array(1)
        .string("orders")
        .array(2)
        .raw(&1i32.to_be_bytes())
        .raw(&2i32.to_be_bytes())
        .raw(&5000i32.to_be_bytes())
        .out;
    let (response, _, _) = refusal(decide_key(43, 0, &body, &grants()));
    let mut r = Resp::new(&response, 7, false);
    assert_eq!(r.i32(), 0);
    assert_eq!(r.array(), 1);
    assert_eq!(r.string(), "orders");
    assert_eq!(r.array(), 2);
    for p in [1, 2] {
        assert_eq!(r.i32(), p);
        assert_eq!(r.i16(), CLUSTER_AUTHORIZATION_FAILED);
        r.nullable().unwrap();
    }
    r.end();
}

#[test]
fn scram_credentials_are_refused_per_user() {
    let body = Req::new(true)
        .array(1)
        .string("alice")
        .raw(&[1])
        .tags()
        .array(1)
        .string("bob")
        .raw(&[1])
        .raw(&4096i32.to_be_bytes())
        .raw(&[3, b's', b'a'])
        .raw(&[3, b'p', b'w'])
        .tags()
        .tags()
        .out;
    let (response, _, of) = refusal(decide_key(51, 0, &body, &grants()));
    assert_eq!(of, 2);
    let mut r = Resp::new(&response, 7, true);
    assert_eq!(r.i32(), 0);
    assert_eq!(r.array(), 2);
    for user in ["alice", "bob"] {
        assert_eq!(r.string(), user);
        assert_eq!(r.i16(), CLUSTER_AUTHORIZATION_FAILED);
        r.nullable().unwrap();
        r.tags();
    }
    r.end();
}

proptest! {
    #[test]
    fn hostile_admin_bodies_never_panic(key in prop::sample::select(vec![20i16, 21, 30, 31, 33, 42, 43, 44, 45, 47, 49, 51, 57, 64]),
                                        version in 0i16..4,
                                        body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decide(api_of(key).unwrap(), version, 1, &body, "t", &Grants::default());
    }
}
