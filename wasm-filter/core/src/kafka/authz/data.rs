//! Data requests that name a consumer group, a transactional id or a topic to create, decided
//! against the tenant's lists (spec.permissions.kafka groups, transactionalIds, createTopics,
//! and produce for the partitions a transaction adds). A tenant without those lists passes at
//! once. A request naming a resource outside them is answered as a broker with ACLs answers
//! it: GROUP_, TRANSACTIONAL_ID_ or TOPIC_AUTHORIZATION_FAILED, per resource where the response
//! has one error per resource, and whole where it has one error.

use super::admin::{end, names, not_granted, string, tags, verdict, Named, Verdict, NOT_ATTEMPTED};
use super::admin::{GROUP_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED, TOPIC_AUTHORIZATION_FAILED};
use super::apis::Api;
use super::writer::Writer;
use super::Grants;
use crate::kafka::cursor::Cursor;
use crate::kafka::rewrite::COORDINATOR_NOT_AVAILABLE;

pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

/// FindCoordinator key types.
const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;

impl Grants {
    /// Whether the tenant has a list the data requests are decided against.
    fn limits_data(&self) -> bool {
        self.groups.is_some()
            || self.transactional_ids.is_some()
            || self.create_topics.is_some()
            || self.produce.is_some()
    }
}

/// Decides a data request the filter reads (apis.rs rows with a version): Forward unless it
/// names a group, transactional id or topic the tenant may not use.
pub fn decide_data(api: &Api, version: i16, corr: i32, body: &[u8], tenant: &str, grants: &Grants) -> Verdict {
    if !grants.limits_data() {
        return Verdict::Forward;
    }
    if api.max_version.is_some_and(|max| version > max) {
        return Verdict::Close("request above the version the gateway advertises");
    }
    let f = api.flexible(version);
    let decided = match api.key {
        8 => offset_commit(version, f, corr, body, grants),
        9 => offset_fetch(version, f, corr, body, grants),
        10 => find_coordinator(version, f, corr, body, tenant, grants),
        11..=14 | 68 => group_member(api.key, version, f, corr, body, tenant, grants),
        19 => create_topics(version, f, corr, body, tenant, grants),
        22 => init_producer_id(f, corr, body, grants),
        24 => add_partitions_to_txn(f, corr, body, grants),
        25 => add_offsets_to_txn(f, corr, body, grants),
        26 => end_txn(version, f, corr, body, grants),
        28 => txn_offset_commit(version, f, corr, body, grants),
        37 => create_partitions(f, corr, body, tenant, grants),
        _ => Some(Verdict::Forward),
    };
    decided.unwrap_or(Verdict::Close("malformed request"))
}

fn group_message(tenant: &str) -> Vec<u8> {
    not_granted("use this consumer group", tenant, "groups")
}

fn transaction_message(tenant: &str) -> Vec<u8> {
    not_granted("use this transactional id", tenant, "transactionalIds")
}

/// A request refused whole for one resource.
fn refused(name: &[u8], response: Vec<u8>) -> Option<Verdict> {
    Some(Verdict::Refuse {
        response,
        denied: name.to_vec(),
        of: 1,
    })
}

/// JoinGroup, Heartbeat, LeaveGroup, SyncGroup and ConsumerGroupHeartbeat: the group is the
/// first field, and the response has one error.
fn group_member(
    key: i16,
    version: i16,
    f: bool,
    corr: i32,
    body: &[u8],
    tenant: &str,
    grants: &Grants,
) -> Option<Verdict> {
    let group = string(&mut Cursor::new(body), f)?;
    if grants.may_use_group(group) {
        return Some(Verdict::Forward);
    }
    let e = GROUP_AUTHORIZATION_FAILED;
    let mut w = Writer::response(corr, f);
    match key {
        11 => {
            if version >= 2 {
                w.i32(0);
            }
            w.i16(e).i32(-1);
            if version >= 7 {
                w.nullable_string(None).nullable_string(None); // protocol type, name
            } else {
                w.string(b"");
            }
            w.string(b""); // leader
            if version >= 9 {
                w.i8(0); // skip_assignment
            }
            w.string(b"").array(0); // member id, members
        }
        12..=14 => {
            if version >= 1 {
                w.i32(0);
            }
            w.i16(e);
            match key {
                13 if version >= 3 => {
                    w.array(0); // members
                }
                14 => {
                    if version >= 5 {
                        w.nullable_string(None).nullable_string(None);
                    }
                    w.no_bytes(); // assignment
                }
                _ => {}
            }
        }
        _ => {
            // ConsumerGroupHeartbeat: no member id, epoch -1, no assignment (a null struct).
            w.i32(0)
                .i16(e)
                .nullable_string(Some(&group_message(tenant)))
                .nullable_string(None)
                .i32(-1)
                .i32(0)
                .i8(-1);
        }
    }
    w.tags();
    refused(group, w.finish())
}

/// FindCoordinator: a group key checked against groups, a transaction key against
/// transactionalIds (other key types pass). v4+ batches keys: each not granted is refused, each
/// granted beside it answered COORDINATOR_NOT_AVAILABLE, which clients retry.
fn find_coordinator(version: i16, f: bool, corr: i32, body: &[u8], tenant: &str, grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let key = if version < 4 { Some(string(&mut c, f)?) } else { None };
    let key_type = if version >= 1 { c.bytes(1)?[0] as i8 } else { GROUP_KEY };
    let (error, message) = match key_type {
        GROUP_KEY => (GROUP_AUTHORIZATION_FAILED, group_message(tenant)),
        TRANSACTION_KEY => (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transaction_message(tenant)),
        _ => return Some(Verdict::Forward),
    };
    let granted = |k: &[u8]| match key_type {
        GROUP_KEY => grants.may_use_group(k),
        _ => grants.may_use_transactional_id(k),
    };
    if let Some(key) = key {
        if granted(key) {
            return Some(Verdict::Forward);
        }
        let mut w = Writer::response(corr, f);
        if version >= 1 {
            w.i32(0);
        }
        w.i16(error);
        if version >= 1 {
            w.nullable_string(Some(&message));
        }
        w.i32(-1).string(b"").i32(-1).tags();
        return refused(key, w.finish());
    }
    let named = names(&mut c, true, granted)?;
    end(&mut c, true)?;
    Some(verdict(&named, || {
        let mut w = Writer::response(corr, true);
        w.i32(0).array(named.len());
        for n in &named {
            let (e, m): (i16, &[u8]) = if n.granted {
                (COORDINATOR_NOT_AVAILABLE, NOT_ATTEMPTED)
            } else {
                (error, &message)
            };
            w.string(n.name)
                .i32(-1)
                .string(b"")
                .i32(-1)
                .i16(e)
                .nullable_string(Some(m))
                .tags();
        }
        w.tags();
        w.finish()
    }))
}

/// Topics and their partitions as a request names them; `partition` reads what follows a
/// partition's index.
fn topic_partitions<'a>(
    c: &mut Cursor<'a>,
    f: bool,
    partition: impl Fn(&mut Cursor<'a>) -> Option<()>,
) -> Option<Vec<(&'a [u8], Vec<i32>)>> {
    let mut topics = Vec::new();
    for _ in 0..c.array_len(f)? {
        let name = string(c, f)?;
        let mut ps = Vec::new();
        for _ in 0..c.array_len(f)? {
            ps.push(c.i32()?);
            partition(c)?;
        }
        tags(c, f)?;
        topics.push((name, ps));
    }
    Some(topics)
}

/// A response of topics, each partition with its error (OffsetCommit, TxnOffsetCommit,
/// AddPartitionsToTxn v0–3).
fn partition_errors(w: &mut Writer, topics: &[(&[u8], Vec<i32>)], error: impl Fn(&[u8]) -> i16) {
    w.array(topics.len());
    for (name, ps) in topics {
        w.string(name).array(ps.len());
        for p in ps {
            w.i32(*p).i16(error(name)).tags();
        }
        w.tags();
    }
    w.tags();
}

fn offset_commit(version: i16, f: bool, corr: i32, body: &[u8], grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let group = string(&mut c, f)?;
    if grants.may_use_group(group) {
        return Some(Verdict::Forward);
    }
    if version >= 1 {
        c.i32()?; // generation or member epoch
        string(&mut c, f)?; // member id
    }
    if version >= 7 {
        c.string_field(f)?; // group instance id
    }
    if (2..=4).contains(&version) {
        c.bytes(8)?; // retention
    }
    let topics = topic_partitions(&mut c, f, |c| {
        c.bytes(8)?; // committed offset
        if version >= 6 {
            c.i32()?; // leader epoch
        }
        if version == 1 {
            c.bytes(8)?; // commit timestamp
        }
        c.string_field(f)?; // metadata
        tags(c, f)
    })?;
    end(&mut c, f)?;
    let mut w = Writer::response(corr, f);
    if version >= 3 {
        w.i32(0);
    }
    partition_errors(&mut w, &topics, |_| GROUP_AUTHORIZATION_FAILED);
    refused(group, w.finish())
}

fn offset_fetch(version: i16, f: bool, corr: i32, body: &[u8], grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    if version < 8 {
        let group = string(&mut c, f)?;
        if grants.may_use_group(group) {
            return Some(Verdict::Forward);
        }
        let mut w = Writer::response(corr, f);
        if version >= 3 {
            w.i32(0);
        }
        if version >= 2 {
            w.array(0).i16(GROUP_AUTHORIZATION_FAILED).tags();
        } else {
            // v0–1 have no group error: each partition asked for carries it.
            let topics = topic_partitions(&mut c, f, |_| Some(()))?;
            w.array(topics.len());
            for (name, ps) in &topics {
                w.string(name).array(ps.len());
                for p in ps {
                    w.i32(*p).i64(-1).string(b"").i16(GROUP_AUTHORIZATION_FAILED);
                }
            }
        }
        return refused(group, w.finish());
    }
    let mut named = Vec::new();
    for _ in 0..c.array_len(true)? {
        let group = string(&mut c, true)?;
        if version >= 9 {
            c.compact_nullable()?; // member id
            c.i32()?; // member epoch
        }
        for _ in 0..c.array_len(true)? {
            string(&mut c, true)?;
            let partitions = c.array_len(true)?;
            c.bytes(partitions.checked_mul(4)?)?;
            c.skip_tagged_fields()?;
        }
        c.skip_tagged_fields()?;
        named.push(Named {
            name: group,
            granted: grants.may_use_group(group),
        });
    }
    c.bytes(1)?; // require stable
    end(&mut c, true)?;
    Some(verdict(&named, || {
        let mut w = Writer::response(corr, true);
        w.i32(0).array(named.len());
        for n in &named {
            let e = if n.granted {
                COORDINATOR_NOT_AVAILABLE
            } else {
                GROUP_AUTHORIZATION_FAILED
            };
            w.string(n.name).array(0).i16(e).tags();
        }
        w.tags();
        w.finish()
    }))
}

fn init_producer_id(f: bool, corr: i32, body: &[u8], grants: &Grants) -> Option<Verdict> {
    // Null: an idempotent producer's id, no transaction.
    let Some(id) = Cursor::new(body).string_field(f)? else {
        return Some(Verdict::Forward);
    };
    if grants.may_use_transactional_id(id) {
        return Some(Verdict::Forward);
    }
    let mut w = Writer::response(corr, f);
    w.i32(0)
        .i16(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        .i64(-1)
        .i16(-1)
        .tags();
    refused(id, w.finish())
}

/// AddPartitionsToTxn v0–3 (the clients' versions): the transactional id, and each topic
/// against produce. A topic not granted is refused with the others not attempted, as a broker
/// does.
fn add_partitions_to_txn(f: bool, corr: i32, body: &[u8], grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let id = string(&mut c, f)?;
    c.bytes(8 + 2)?; // producer id, epoch
    let topics = topic_partitions(&mut c, f, |_| Some(()))?;
    end(&mut c, f)?;
    let id_granted = grants.may_use_transactional_id(id);
    let denied = match topics.iter().find(|(t, _)| !grants.may_produce(t)) {
        _ if !id_granted => id,
        Some((t, _)) => t,
        None => return Some(Verdict::Forward),
    };
    let mut w = Writer::response(corr, f);
    w.i32(0);
    partition_errors(&mut w, &topics, |t| match (id_granted, grants.may_produce(t)) {
        (false, _) => TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        (true, false) => TOPIC_AUTHORIZATION_FAILED,
        (true, true) => OPERATION_NOT_ATTEMPTED,
    });
    refused(denied, w.finish())
}

/// AddOffsetsToTxn: the transactional id, then the group.
fn add_offsets_to_txn(f: bool, corr: i32, body: &[u8], grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let id = string(&mut c, f)?;
    c.bytes(8 + 2)?;
    let group = string(&mut c, f)?;
    let Some((denied, e)) = transaction_and_group(grants, id, group) else {
        return Some(Verdict::Forward);
    };
    let mut w = Writer::response(corr, f);
    w.i32(0).i16(e).tags();
    refused(denied, w.finish())
}

/// A request naming a transactional id and a group: the first not granted, with its error.
fn transaction_and_group<'a>(grants: &Grants, id: &'a [u8], group: &'a [u8]) -> Option<(&'a [u8], i16)> {
    if !grants.may_use_transactional_id(id) {
        Some((id, TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    } else if !grants.may_use_group(group) {
        Some((group, GROUP_AUTHORIZATION_FAILED))
    } else {
        None
    }
}

fn end_txn(version: i16, f: bool, corr: i32, body: &[u8], grants: &Grants) -> Option<Verdict> {
    let id = string(&mut Cursor::new(body), f)?;
    if grants.may_use_transactional_id(id) {
        return Some(Verdict::Forward);
    }
    let mut w = Writer::response(corr, f);
    w.i32(0).i16(TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    if version >= 5 {
        w.i64(-1).i16(-1);
    }
    w.tags();
    refused(id, w.finish())
}

fn txn_offset_commit(version: i16, f: bool, corr: i32, body: &[u8], grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let id = string(&mut c, f)?;
    let group = string(&mut c, f)?;
    let Some((denied, e)) = transaction_and_group(grants, id, group) else {
        return Some(Verdict::Forward);
    };
    c.bytes(8 + 2)?; // producer id, epoch
    if version >= 3 {
        c.i32()?; // generation
        string(&mut c, f)?; // member id
        c.string_field(f)?; // group instance id
    }
    let topics = topic_partitions(&mut c, f, |c| {
        c.bytes(8)?; // committed offset
        if version >= 2 {
            c.i32()?; // leader epoch
        }
        c.string_field(f)?; // metadata
        tags(c, f)
    })?;
    end(&mut c, f)?;
    let mut w = Writer::response(corr, f);
    w.i32(0);
    partition_errors(&mut w, &topics, |_| e);
    refused(denied, w.finish())
}

fn create_topics(version: i16, f: bool, corr: i32, body: &[u8], tenant: &str, grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let mut named = Vec::new();
    for _ in 0..c.array_len(f)? {
        let name = string(&mut c, f)?;
        c.bytes(4 + 2)?; // partitions, replication factor
        for _ in 0..c.array_len(f)? {
            c.i32()?;
            let brokers = c.array_len(f)?;
            c.bytes(brokers.checked_mul(4)?)?;
            tags(&mut c, f)?;
        }
        for _ in 0..c.array_len(f)? {
            string(&mut c, f)?;
            c.string_field(f)?;
            tags(&mut c, f)?;
        }
        tags(&mut c, f)?;
        named.push(Named {
            name,
            granted: grants.may_create_topic(name),
        });
    }
    c.i32()?; // timeout
    if version >= 1 {
        c.bytes(1)?; // validate only
    }
    end(&mut c, f)?;
    let message = not_granted("create this topic", tenant, "createTopics");
    Some(verdict(&named, || {
        let mut w = Writer::response(corr, f);
        if version >= 2 {
            w.i32(0);
        }
        w.array(named.len());
        for n in &named {
            w.string(n.name);
            if version >= 7 {
                w.raw(&[0; 16]); // topic id
            }
            w.i16(n.error(TOPIC_AUTHORIZATION_FAILED));
            if version >= 1 {
                w.nullable_string(Some(if n.granted { NOT_ATTEMPTED } else { &message }));
            }
            if version >= 5 {
                w.i32(-1).i16(-1).raw(&[0]); // partitions, replication factor, configs: null
            }
            w.tags();
        }
        w.tags();
        w.finish()
    }))
}

fn create_partitions(f: bool, corr: i32, body: &[u8], tenant: &str, grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let mut named = Vec::new();
    for _ in 0..c.array_len(f)? {
        let name = string(&mut c, f)?;
        c.i32()?; // count
                  // Assignments: null or a list of broker-id lists.
        for _ in 0..c.array_len(f)? {
            let brokers = c.array_len(f)?;
            c.bytes(brokers.checked_mul(4)?)?;
            tags(&mut c, f)?;
        }
        tags(&mut c, f)?;
        named.push(Named {
            name,
            granted: grants.may_create_topic(name),
        });
    }
    c.bytes(4 + 1)?; // timeout, validate only
    end(&mut c, f)?;
    let message = not_granted("add partitions to this topic", tenant, "createTopics");
    Some(verdict(&named, || {
        let mut w = Writer::response(corr, f);
        w.i32(0).array(named.len());
        for n in &named {
            w.string(n.name)
                .i16(n.error(TOPIC_AUTHORIZATION_FAILED))
                .nullable_string(Some(if n.granted { NOT_ATTEMPTED } else { &message }))
                .tags();
        }
        w.tags();
        w.finish()
    }))
}
