//! Metadata (and DescribeTopicPartitions, which Admin describeTopics reads), by what the tenant
//! may see: a topic it may neither produce to nor consume from is left out of an all-topics
//! answer and, named in the request, answered TOPIC_AUTHORIZATION_FAILED without its partitions
//! (as a broker with ACLs answers it, so a Java producer raises TopicAuthorizationException at
//! once). A request may auto-create only
//! topics the tenant may see and create: otherwise its allow_auto_topic_creation is cleared.

use super::admin::TOPIC_AUTHORIZATION_FAILED;
use super::Grants;
use crate::kafka::cursor::Cursor;

/// The first Metadata version whose request says whether to auto-create.
const FIRST_AUTO_CREATE: i16 = 4;
const FIRST_FLEXIBLE: i16 = 9;
/// Kafka's "authorized operations not asked for".
const NO_OPERATIONS: i32 = i32::MIN;

/// What a Metadata request asks, for its response's filtering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataAsk {
    /// Every topic (not named one by one).
    pub all_topics: bool,
    /// Where, in the body, the allow_auto_topic_creation flag to clear is: it is set, and names
    /// a topic the tenant may not see or create.
    pub clear_auto_create: Option<usize>,
}

/// Reads a Metadata request body; None: it does not parse.
pub fn metadata_request(body: &[u8], version: i16, grants: &Grants) -> Option<MetadataAsk> {
    let f = version >= FIRST_FLEXIBLE;
    let mut c = Cursor::new(body);
    let null = if f {
        let mut peek = Cursor::new(body);
        peek.uvarint()? == 0
    } else {
        body.get(..4)? == (-1i32).to_be_bytes()
    };
    let n = c.array_len(f)?;
    let all_topics = (version >= 1 && null) || (version == 0 && n == 0);
    let mut may_not_create = false;
    for _ in 0..n {
        if version >= 10 {
            c.bytes(16)?; // topic id
        }
        if let Some(name) = c.string_field(f)? {
            may_not_create |= !(grants.may_see(name) && grants.may_create_topic(name));
        }
        if f {
            c.skip_tagged_fields()?;
        }
    }
    let mut clear_auto_create = None;
    if version >= FIRST_AUTO_CREATE {
        let at = c.position();
        if c.bytes(1)? == [1] && may_not_create {
            clear_auto_create = Some(at);
        }
    }
    Some(MetadataAsk {
        all_topics,
        clear_auto_create,
    })
}

/// Whether a DescribeTopicPartitions request (v0) asks for every topic (names none); None: it
/// does not parse.
pub fn describes_all_topics(body: &[u8]) -> Option<bool> {
    Some(Cursor::new(body).array_len(true)? == 0)
}

/// A Metadata response filtered.
#[derive(Debug, PartialEq, Eq)]
pub struct Filtered {
    pub frame: Vec<u8>,
    /// The topics named in the request that were answered TOPIC_AUTHORIZATION_FAILED.
    pub refused: Vec<Vec<u8>>,
}

/// Filters a whole Metadata response frame (size prefix included) of `version` (0–12); None if
/// nothing is hidden, or it does not parse.
pub fn filter_metadata(frame: &[u8], version: i16, all_topics: bool, grants: &Grants) -> Option<Filtered> {
    let f = version >= FIRST_FLEXIBLE;
    let mut c = Cursor::after_response_header(frame, f)?;
    if version >= 3 {
        c.i32()?; // throttle
    }
    for _ in 0..c.array_len(f)? {
        c.i32()?;
        c.string_field(f)?;
        c.i32()?;
        if version >= 1 {
            c.string_field(f)?; // rack
        }
        if f {
            c.skip_tagged_fields()?;
        }
    }
    if version >= 2 {
        c.string_field(f)?; // cluster id
    }
    if version >= 1 {
        c.i32()?; // controller
    }
    let head = c.position();
    let layout = Layout {
        flexible: f,
        topic_id: version >= 10,
        internal: version >= 1,
        operations: version >= 8,
    };
    let partition = |c: &mut Cursor<'_>| {
        c.bytes(2 + 4 + 4)?; // error, index, leader
        if version >= 7 {
            c.i32()?; // leader epoch
        }
        for _ in 0..if version >= 5 { 3 } else { 2 } {
            let nodes = c.array_len(f)?;
            c.bytes(nodes.checked_mul(4)?)?;
        }
        Some(())
    };
    filter_topics(frame, c, head, layout, all_topics, grants, partition)
}

/// Filters a whole DescribeTopicPartitions response frame (v0, KIP-966: what Admin
/// describeTopics reads) as Metadata's; None if nothing is hidden, or it does not parse.
pub fn filter_topic_partitions(frame: &[u8], all_topics: bool, grants: &Grants) -> Option<Filtered> {
    let mut c = Cursor::after_response_header(frame, true)?;
    c.i32()?; // throttle
    let head = c.position();
    let layout = Layout {
        flexible: true,
        topic_id: true,
        internal: true,
        operations: true,
    };
    let partition = |c: &mut Cursor<'_>| {
        c.bytes(2 + 4 + 4 + 4)?; // error, index, leader, leader epoch
                                 // Replicas, ISR, eligible leader replicas and last known ELR (both nullable), offline.
        for _ in 0..5 {
            let nodes = c.array_len(true)?;
            c.bytes(nodes.checked_mul(4)?)?;
        }
        Some(())
    };
    filter_topics(frame, c, head, layout, all_topics, grants, partition)
}

/// Which fields a topic entry of a response version has.
#[derive(Clone, Copy)]
struct Layout {
    flexible: bool,
    topic_id: bool,
    internal: bool,
    operations: bool,
}

/// The topics array the cursor is at (`head` in `frame`): a topic the tenant may not see is
/// left out of an all-topics answer, or answered TOPIC_AUTHORIZATION_FAILED without its
/// partitions. `partition` reads a partition up to its tagged fields. The rest of the frame is
/// copied as it is.
fn filter_topics(
    frame: &[u8],
    mut c: Cursor<'_>,
    head: usize,
    l: Layout,
    all_topics: bool,
    grants: &Grants,
    partition: impl Fn(&mut Cursor<'_>) -> Option<()>,
) -> Option<Filtered> {
    let f = l.flexible;
    let n = c.array_len(f)?;
    let mut kept = Vec::with_capacity(frame.len() - head);
    let mut count = 0usize;
    let mut refused = Vec::new();
    let mut hidden = 0usize;
    for _ in 0..n {
        let at = c.position();
        c.i16()?; // error
        let name = c.string_field(f)?;
        let id = if l.topic_id { c.bytes(16)? } else { &[] };
        if l.internal {
            c.bytes(1)?;
        }
        for _ in 0..c.array_len(f)? {
            partition(&mut c)?;
            if f {
                c.skip_tagged_fields()?;
            }
        }
        if l.operations {
            c.i32()?;
        }
        if f {
            c.skip_tagged_fields()?;
        }
        match name {
            Some(name) if !grants.may_see(name) => {
                hidden += 1;
                if all_topics {
                    continue;
                }
                write_refused(&mut kept, l, name, id);
                refused.push(name.to_vec());
            }
            _ => kept.extend_from_slice(frame.get(at..c.position())?),
        }
        count += 1;
    }
    if hidden == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(frame.len());
    out.extend_from_slice(frame.get(..head)?);
    crate::kafka::encode::array_len(&mut out, count, f);
    out.extend_from_slice(&kept);
    out.extend_from_slice(frame.get(c.position()..)?);
    let size = i32::try_from(out.len() - 4).ok()?;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Some(Filtered { frame: out, refused })
}

/// A topic entry answered TOPIC_AUTHORIZATION_FAILED: its name and id, no partitions.
fn write_refused(out: &mut Vec<u8>, l: Layout, name: &[u8], id: &[u8]) {
    out.extend_from_slice(&TOPIC_AUTHORIZATION_FAILED.to_be_bytes());
    crate::kafka::encode::string(out, name, l.flexible);
    out.extend_from_slice(id);
    if l.internal {
        out.push(0); // not internal
    }
    crate::kafka::encode::array_len(out, 0, l.flexible);
    if l.operations {
        out.extend_from_slice(&NO_OPERATIONS.to_be_bytes());
    }
    if l.flexible {
        out.push(0);
    }
}
