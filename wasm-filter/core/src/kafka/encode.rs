//! The few Kafka messages the filter writes: a Produce response carrying an error for every
//! partition of a refused request, and the ApiVersions request that takes a refused Produce's
//! place on the way to the broker (same correlation id, so the broker's answer arrives in order
//! and can be replaced).

use super::{API_VERSIONS, FIRST_FLEXIBLE_PRODUCE};

/// Kafka error codes the filter answers with.
pub const MESSAGE_TOO_LARGE: i16 = 10;
pub const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

pub(crate) fn uvarint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

pub(crate) fn array_len(out: &mut Vec<u8>, n: usize, flexible: bool) {
    if flexible {
        uvarint(out, n as u64 + 1);
    } else {
        out.extend_from_slice(&(n as i32).to_be_bytes());
    }
}

/// BYTES or COMPACT_BYTES (a record set's length prefix is an array's); the tests' request and
/// response bodies carry record sets.
#[cfg(test)]
pub(crate) fn bytes(out: &mut Vec<u8>, b: &[u8], flexible: bool) {
    array_len(out, b.len(), flexible);
    out.extend_from_slice(b);
}

pub(crate) fn string(out: &mut Vec<u8>, s: &[u8], flexible: bool) {
    if flexible {
        uvarint(out, s.len() as u64 + 1);
    } else {
        out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn nullable_string(out: &mut Vec<u8>, s: Option<&[u8]>, flexible: bool) {
    match s {
        Some(s) => string(out, s, flexible),
        None if flexible => out.push(0),
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}

fn framed(body: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as i32).to_be_bytes());
    out.extend(body);
    out
}

/// One partition's answer in a synthesised Produce response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionError {
    pub partition: i32,
    pub error: i16,
}

/// A Produce response (versions 3–12) answering every partition with its error.
pub fn produce_response(
    version: i16,
    correlation_id: i32,
    topics: &[(Vec<u8>, Vec<PartitionError>)],
    throttle_ms: i32,
    message: Option<&[u8]>,
) -> Vec<u8> {
    let flexible = version >= FIRST_FLEXIBLE_PRODUCE;
    let mut b = Vec::with_capacity(64 + topics.len() * 64);
    b.extend_from_slice(&correlation_id.to_be_bytes());
    if flexible {
        b.push(0); // response header v1: no tagged fields
    }
    array_len(&mut b, topics.len(), flexible);
    for (name, partitions) in topics {
        string(&mut b, name, flexible);
        array_len(&mut b, partitions.len(), flexible);
        for p in partitions {
            b.extend_from_slice(&p.partition.to_be_bytes());
            b.extend_from_slice(&p.error.to_be_bytes());
            b.extend_from_slice(&(-1i64).to_be_bytes()); // base_offset
            b.extend_from_slice(&(-1i64).to_be_bytes()); // log_append_time_ms
            if version >= 5 {
                b.extend_from_slice(&(-1i64).to_be_bytes()); // log_start_offset
            }
            if version >= 8 {
                array_len(&mut b, 0, flexible); // record_errors
                nullable_string(&mut b, message, flexible);
            }
            if flexible {
                b.push(0);
            }
        }
        if flexible {
            b.push(0);
        }
    }
    b.extend_from_slice(&throttle_ms.to_be_bytes());
    if flexible {
        b.push(0);
    }
    framed(b)
}

/// A request frame: header v1 (v2 with no tagged fields when `flexible`) and `body`. For a
/// request whose body the filter changed.
pub fn request_frame(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    client_id: Option<&[u8]>,
    flexible: bool,
    body: &[u8],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(32 + body.len());
    b.extend_from_slice(&api_key.to_be_bytes());
    b.extend_from_slice(&version.to_be_bytes());
    b.extend_from_slice(&correlation_id.to_be_bytes());
    nullable_string(&mut b, client_id, false);
    if flexible {
        b.push(0);
    }
    b.extend_from_slice(body);
    framed(b)
}

/// An ApiVersions v0 request: the cheapest request a broker answers, in order, without effect.
pub fn api_versions_request(correlation_id: i32, client_id: Option<&[u8]>) -> Vec<u8> {
    let mut b = Vec::with_capacity(32);
    b.extend_from_slice(&API_VERSIONS.to_be_bytes());
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&correlation_id.to_be_bytes());
    nullable_string(&mut b, client_id, false);
    framed(b)
}
