//! A Fetch naming a topic the tenant may not consume from: refused whole, each partition of a
//! topic not granted answered TOPIC_AUTHORIZATION_FAILED (the Java consumer raises
//! TopicAuthorizationException), each other partition answered with no records and no offsets
//! (-1: what clients take for "nothing known"), so it is simply fetched again. The response
//! closes the fetch session (session id 0): the client's next Fetch is a full one.

use super::admin::{Verdict, TOPIC_AUTHORIZATION_FAILED};
use super::writer::Writer;
use super::Grants;
use crate::kafka::fetch::{fetch_partitions, flexible_fetch};

/// Decides a Fetch (versions 4–12) against the tenant's consume list.
pub fn decide_fetch(version: i16, corr: i32, body: &[u8], grants: &Grants) -> Verdict {
    if grants.consume.is_none() {
        return Verdict::Forward;
    }
    let Some(topics) = fetch_partitions(body, version) else {
        return Verdict::Close("malformed fetch request");
    };
    let topics: Vec<(&[u8], bool, Vec<i32>)> = topics
        .into_iter()
        .map(|(t, ps)| (t, grants.may_consume(t), ps))
        .collect();
    let mut denied = topics.iter().filter(|(_, granted, _)| !granted);
    let Some(first) = denied.next() else {
        return Verdict::Forward;
    };
    let (first, of) = (first.0.to_vec(), 1 + denied.count());
    let f = flexible_fetch(version);
    let mut w = Writer::response(corr, f);
    w.i32(0); // throttle
    if version >= 7 {
        w.i16(0).i32(0); // error, session id: none
    }
    w.array(topics.len());
    for (name, granted, ps) in &topics {
        w.string(name).array(ps.len());
        for p in ps {
            let e = if *granted { 0 } else { TOPIC_AUTHORIZATION_FAILED };
            w.i32(*p).i16(e).i64(-1).i64(-1); // high watermark, last stable offset
            if version >= 5 {
                w.i64(-1); // log start offset
            }
            null(&mut w, f); // aborted transactions
            if version >= 11 {
                w.i32(-1); // preferred read replica
            }
            w.no_bytes(); // records: none (empty, as a broker's error answer has them)
            w.tags();
        }
        w.tags();
    }
    w.tags();
    Verdict::Refuse {
        response: w.finish(),
        denied: first,
        of,
    }
}

/// A null array or bytes field.
fn null(w: &mut Writer, f: bool) {
    if f {
        w.raw(&[0]);
    } else {
        w.i32(-1);
    }
}
