//! Destructive, config-altering and cluster-altering requests, decided per resource against the
//! tenant's grants. A request that names only granted resources goes to the broker; one that
//! names any other is refused whole, in the response a broker with ACLs would write: each
//! resource not granted answered with its *_AUTHORIZATION_FAILED, and each granted one beside it
//! with OPERATION_NOT_ATTEMPTED (Kafka's own answer for the rest of a batch it did not try), so
//! nothing is done that the client is not told of. These requests are rare: they are parsed
//! whole, with no caching.

use super::apis::{Api, Class, ClusterOp};
use super::writer::Writer;
use super::Grants;
use crate::kafka::cursor::Cursor;

pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
pub const OPERATION_NOT_ATTEMPTED: i16 = 55;

/// Resource types of AlterConfigs and IncrementalAlterConfigs (Kafka's ConfigResource.Type).
const TOPIC_RESOURCE: i8 = 2;

/// What to do with an admin request.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Forward,
    /// Answer it with `response`: `denied` names the first resource not granted, `of` how many.
    Refuse {
        response: Vec<u8>,
        denied: Vec<u8>,
        of: usize,
    },
    /// Unreadable: close the connection, as a broker does.
    Close(&'static str),
}

/// Decides a request of an admin API (classes Destructive, AlterConfigs and Cluster).
pub fn decide(api: &Api, version: i16, correlation_id: i32, body: &[u8], tenant: &str, grants: &Grants) -> Verdict {
    if api.max_version.is_some_and(|max| version > max) {
        // Above what the gateway advertises (its ApiVersions answer caps it).
        return Verdict::Close("admin request above the version the gateway advertises");
    }
    let flexible = api.flexible(version);
    let decided = match (api.key, api.class) {
        (20, _) => delete_topics(version, flexible, correlation_id, body, tenant, grants),
        (21, _) => delete_records(flexible, correlation_id, body, grants),
        (42, _) => delete_groups(flexible, correlation_id, body, grants),
        (47, _) => offset_delete(correlation_id, body, grants),
        (33 | 44, _) => alter_configs(api.key, flexible, correlation_id, body, tenant, grants),
        (_, Class::Cluster(op)) if grants.cluster(op) => Some(Verdict::Forward),
        (_, Class::Cluster(op)) => cluster(op, version, flexible, correlation_id, body, tenant),
        _ => Some(Verdict::Forward),
    };
    decided.unwrap_or(Verdict::Close("malformed admin request"))
}

/// One resource of a request: its name, whether granted.
pub(super) struct Named<'a> {
    pub(super) name: &'a [u8],
    pub(super) granted: bool,
}

impl Named<'_> {
    /// Its answer in a refused request: `denied` if not granted, else not attempted.
    pub(super) fn error(&self, denied: i16) -> i16 {
        if self.granted {
            OPERATION_NOT_ATTEMPTED
        } else {
            denied
        }
    }
}

/// A list of names (topics, groups), each judged by `granted`.
pub(super) fn names<'a>(c: &mut Cursor<'a>, flexible: bool, granted: impl Fn(&[u8]) -> bool) -> Option<Vec<Named<'a>>> {
    let mut named = Vec::new();
    for _ in 0..c.array_len(flexible)? {
        let name = string(c, flexible)?;
        named.push(Named {
            name,
            granted: granted(name),
        });
    }
    Some(named)
}

/// Forward when every resource is granted; else the refusal `write` makes, naming the first
/// resource not granted.
pub(super) fn verdict(named: &[Named<'_>], write: impl FnOnce() -> Vec<u8>) -> Verdict {
    let mut denied = named.iter().filter(|n| !n.granted);
    let Some(first) = denied.next() else {
        return Verdict::Forward;
    };
    Verdict::Refuse {
        denied: first.name.to_vec(),
        of: 1 + denied.count(),
        response: write(),
    }
}

pub(super) fn not_granted(what: &str, tenant: &str, field: &str) -> Vec<u8> {
    format!("weighstation: tenant {tenant} may not {what} (LimitPolicy spec.permissions.kafka.{field})").into_bytes()
}

pub(super) const NOT_ATTEMPTED: &[u8] =
    b"weighstation: not attempted: the request also named resources this tenant may not act on";

pub(super) fn string<'a>(c: &mut Cursor<'a>, flexible: bool) -> Option<&'a [u8]> {
    c.string_field(flexible)?
}

pub(super) fn tags(c: &mut Cursor<'_>, flexible: bool) -> Option<()> {
    if flexible {
        c.skip_tagged_fields()?;
    }
    Some(())
}

/// The request's last tagged fields, and nothing after them: a body read any other way than
/// its version says is refused, never decided on what was misread.
pub(super) fn end(c: &mut Cursor<'_>, flexible: bool) -> Option<()> {
    tags(c, flexible)?;
    c.at_end().then_some(())
}

fn delete_topics(
    version: i16,
    flexible: bool,
    corr: i32,
    body: &[u8],
    tenant: &str,
    grants: &Grants,
) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let named = names(&mut c, flexible, |t| grants.may_delete_topic(t))?;
    c.i32()?; // timeout_ms
    end(&mut c, flexible)?;
    let message = not_granted("delete this topic", tenant, "deleteTopics");
    Some(verdict(&named, || {
        let mut w = Writer::response(corr, flexible);
        if version >= 1 {
            w.i32(0);
        }
        w.array(named.len());
        for n in &named {
            w.string(n.name).i16(n.error(TOPIC_AUTHORIZATION_FAILED));
            if version >= 5 {
                w.nullable_string(Some(if n.granted { NOT_ATTEMPTED } else { &message }));
            }
            w.tags();
        }
        w.tags();
        w.finish()
    }))
}

fn delete_records(flexible: bool, corr: i32, body: &[u8], grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let mut named = Vec::new();
    let mut partitions: Vec<Vec<i32>> = Vec::new();
    for _ in 0..c.array_len(flexible)? {
        let name = string(&mut c, flexible)?;
        let mut ps = Vec::new();
        for _ in 0..c.array_len(flexible)? {
            ps.push(c.i32()?);
            c.bytes(8)?; // offset
            tags(&mut c, flexible)?;
        }
        tags(&mut c, flexible)?;
        named.push(Named {
            name,
            granted: grants.may_delete_topic(name),
        });
        partitions.push(ps);
    }
    c.i32()?; // timeout_ms
    end(&mut c, flexible)?;
    Some(verdict(&named, || {
        let mut w = Writer::response(corr, flexible);
        w.i32(0).array(named.len());
        for (n, ps) in named.iter().zip(&partitions) {
            w.string(n.name).array(ps.len());
            for p in ps {
                w.i32(*p).i64(-1).i16(n.error(TOPIC_AUTHORIZATION_FAILED)).tags();
            }
            w.tags();
        }
        w.tags();
        w.finish()
    }))
}

fn delete_groups(flexible: bool, corr: i32, body: &[u8], grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let named = names(&mut c, flexible, |g| grants.may_delete_group(g))?;
    end(&mut c, flexible)?;
    Some(verdict(&named, || {
        let mut w = Writer::response(corr, flexible);
        w.i32(0).array(named.len());
        for n in &named {
            w.string(n.name).i16(n.error(GROUP_AUTHORIZATION_FAILED)).tags();
        }
        w.tags();
        w.finish()
    }))
}

fn offset_delete(corr: i32, body: &[u8], grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let group = string(&mut c, false)?;
    for _ in 0..c.array_len(false)? {
        string(&mut c, false)?;
        let partitions = c.array_len(false)?;
        c.bytes(partitions.checked_mul(4)?)?;
    }
    end(&mut c, false)?;
    let named = [Named {
        name: group,
        granted: grants.may_delete_group(group),
    }];
    Some(verdict(&named, || {
        // As a broker answers a group it may not touch: the group's error, no partitions.
        let mut w = Writer::response(corr, false);
        w.i16(GROUP_AUTHORIZATION_FAILED).i32(0).array(0);
        w.finish()
    }))
}

fn alter_configs(key: i16, flexible: bool, corr: i32, body: &[u8], tenant: &str, grants: &Grants) -> Option<Verdict> {
    let mut c = Cursor::new(body);
    let mut resources = Vec::new();
    for _ in 0..c.array_len(flexible)? {
        let kind = c.bytes(1)?[0] as i8;
        let name = string(&mut c, flexible)?;
        for _ in 0..c.array_len(flexible)? {
            string(&mut c, flexible)?;
            if key == 44 {
                c.bytes(1)?; // config_operation
            }
            c.string_field(flexible)?; // value
            tags(&mut c, flexible)?;
        }
        tags(&mut c, flexible)?;
        let granted = if kind == TOPIC_RESOURCE {
            grants.may_alter_topic_configs(name)
        } else {
            grants.cluster(ClusterOp::AlterBrokerConfigs)
        };
        resources.push((kind, Named { name, granted }));
    }
    c.bytes(1)?; // validate_only
    end(&mut c, flexible)?;
    let named: Vec<Named<'_>> = resources
        .iter()
        .map(|(_, n)| Named {
            name: n.name,
            granted: n.granted,
        })
        .collect();
    let topic_message = not_granted("alter this topic's configs", tenant, "alterTopicConfigs");
    let cluster_message = not_granted("alter broker configs: AlterBrokerConfigs", tenant, "cluster");
    Some(verdict(&named, || {
        let mut w = Writer::response(corr, flexible);
        w.i32(0).array(resources.len());
        for (kind, n) in &resources {
            let (error, message): (i16, &[u8]) = match (n.granted, *kind == TOPIC_RESOURCE) {
                (true, _) => (OPERATION_NOT_ATTEMPTED, NOT_ATTEMPTED),
                (false, true) => (TOPIC_AUTHORIZATION_FAILED, &topic_message),
                (false, false) => (CLUSTER_AUTHORIZATION_FAILED, &cluster_message),
            };
            w.i16(error)
                .nullable_string(Some(message))
                .i8(*kind)
                .string(n.name)
                .tags();
        }
        w.tags();
        w.finish()
    }))
}

/// A cluster-altering request not granted: every entry it names answered
/// CLUSTER_AUTHORIZATION_FAILED, or the request as a whole where its response has one error.
fn cluster(op: ClusterOp, version: i16, flexible: bool, corr: i32, body: &[u8], tenant: &str) -> Option<Verdict> {
    let mut message = not_granted(&format!("send {}", op.name()), tenant, "cluster");
    if op == ClusterOp::AlterClientQuotas {
        message.extend_from_slice(
            b"; it changes the broker's quotas: the gateway's limits are set in the tenant's LimitPolicy",
        );
    }
    let mut c = Cursor::new(body);
    let e = CLUSTER_AUTHORIZATION_FAILED;
    let m = Some(message.as_slice());
    let (response, of) = match op {
        ClusterOp::AlterClientQuotas => {
            let mut entries = Vec::new();
            for _ in 0..c.array_len(flexible)? {
                let mut entity = Vec::new();
                for _ in 0..c.array_len(flexible)? {
                    let kind = string(&mut c, flexible)?;
                    let name = c.string_field(flexible)?;
                    tags(&mut c, flexible)?;
                    entity.push((kind, name));
                }
                for _ in 0..c.array_len(flexible)? {
                    string(&mut c, flexible)?;
                    c.bytes(9)?; // value (float64), remove (bool)
                    tags(&mut c, flexible)?;
                }
                tags(&mut c, flexible)?;
                entries.push(entity);
            }
            c.bytes(1)?; // validate_only
            end(&mut c, flexible)?;
            let mut w = Writer::response(corr, flexible);
            w.i32(0).array(entries.len());
            for entity in &entries {
                w.i16(e).nullable_string(m).array(entity.len());
                for (kind, name) in entity {
                    w.string(kind).nullable_string(*name).tags();
                }
                w.tags();
            }
            w.tags();
            (w.finish(), entries.len())
        }
        ClusterOp::CreateAcls | ClusterOp::DeleteAcls => {
            let n = c.array_len(flexible)?;
            for _ in 0..n {
                c.bytes(1)?; // resource type
                c.string_field(flexible)?;
                if version >= 1 {
                    c.bytes(1)?; // pattern type
                }
                c.string_field(flexible)?; // principal
                c.string_field(flexible)?; // host
                c.bytes(2)?; // operation, permission type
                tags(&mut c, flexible)?;
            }
            end(&mut c, flexible)?;
            let mut w = Writer::response(corr, flexible);
            w.i32(0).array(n);
            for _ in 0..n {
                w.i16(e).nullable_string(m);
                if op == ClusterOp::DeleteAcls {
                    w.array(0); // matching_acls
                }
                w.tags();
            }
            w.tags();
            (w.finish(), n)
        }
        ClusterOp::ElectLeaders => {
            let mut w = Writer::response(corr, flexible);
            w.i32(0);
            if version >= 1 {
                w.i16(e).array(0);
                w.tags();
                (w.finish(), 1)
            } else {
                // v0 has no error of its own: each partition it names is answered.
                let mut topics = Vec::new();
                // Null (every partition) names none to answer.
                for _ in 0..c.array_len(flexible)? {
                    let topic = string(&mut c, flexible)?;
                    let mut ps = Vec::new();
                    for _ in 0..c.array_len(flexible)? {
                        ps.push(c.i32()?);
                    }
                    tags(&mut c, flexible)?;
                    topics.push((topic, ps));
                }
                c.i32()?; // timeout_ms
                end(&mut c, flexible)?;
                w.array(topics.len());
                for (topic, ps) in &topics {
                    w.string(topic).array(ps.len());
                    for p in ps {
                        w.i32(*p).i16(e).nullable_string(m).tags();
                    }
                    w.tags();
                }
                w.tags();
                (w.finish(), topics.len().max(1))
            }
        }
        ClusterOp::AlterUserScramCredentials => {
            let mut users: Vec<&[u8]> = Vec::new();
            for upserting in [false, true] {
                for _ in 0..c.array_len(true)? {
                    let user = string(&mut c, true)?;
                    c.bytes(1)?; // mechanism
                    if upserting {
                        c.i32()?; // iterations
                        c.compact_nullable()?; // salt
                        c.compact_nullable()?; // salted password
                    }
                    c.skip_tagged_fields()?;
                    if !users.contains(&user) {
                        users.push(user);
                    }
                }
            }
            end(&mut c, true)?;
            let mut w = Writer::response(corr, true);
            w.i32(0).array(users.len());
            for user in &users {
                w.string(user).i16(e).nullable_string(m).tags();
            }
            w.tags();
            (w.finish(), users.len())
        }
        ClusterOp::AlterPartitionReassignments | ClusterOp::UnregisterBroker => {
            let mut w = Writer::response(corr, true);
            w.i32(0).i16(e).nullable_string(m);
            if op == ClusterOp::AlterPartitionReassignments {
                w.array(0);
            }
            w.tags();
            (w.finish(), 1)
        }
        ClusterOp::UpdateFeatures => {
            let mut w = Writer::response(corr, true);
            w.i32(0).i16(e).nullable_string(m);
            if version <= 1 {
                w.array(0);
            }
            w.tags();
            (w.finish(), 1)
        }
        // Decided with the AlterConfigs family, per resource.
        ClusterOp::AlterBrokerConfigs => return Some(Verdict::Forward),
    };
    Some(Verdict::Refuse {
        response,
        denied: op.name().as_bytes().to_vec(),
        of,
    })
}
