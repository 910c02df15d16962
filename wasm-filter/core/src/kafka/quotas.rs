//! DescribeClientQuotas (KIP-546) through the gateway: the broker's answer cut down to the
//! caller's own entities, with the gateway's limits in place of the broker's where the gateway
//! has one. Behind the plaintext and mTLS listeners the broker answers the gateway, so without
//! this any tenant would read every other tenant's broker quotas; and a client asking what it
//! may send should learn the limit that applies first, the gateway's.
//!
//! An entry is the caller's when each of its entities is the caller's own (`user`: the SASL
//! principal the broker accepted; `client-id`: the request's client id) or a default (no name,
//! which applies to every client alike). Other entries (other users and client ids, `ip`) are
//! left out. The gateway's limits are its tenant's `rate.bytesPerSecond` (producer_byte_rate)
//! and `consume.bytesPerSecond` (consumer_byte_rate); Kafka has no quota key for a message rate.

use super::cursor::Cursor;
use super::encode::{array_len, string, uvarint};

pub const API_DESCRIBE_CLIENT_QUOTAS: i16 = 48;
const FIRST_FLEXIBLE: i16 = 1;

const USER: &[u8] = b"user";
const CLIENT_ID: &[u8] = b"client-id";
/// Match types of a filter component.
const EXACT: i8 = 0;
const ANY: i8 = 2;

pub const PRODUCER_BYTE_RATE: &[u8] = b"producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &[u8] = b"consumer_byte_rate";

/// Who asks.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The SASL principal the broker accepted: Kafka's `user` entity.
    pub user: Option<&'a [u8]>,
    pub client_id: Option<&'a [u8]>,
}

/// The gateway's limits for the caller, in bytes per second.
#[derive(Debug, Clone, Copy, Default)]
pub struct GatewayQuotas {
    pub producer_byte_rate: Option<u64>,
    pub consumer_byte_rate: Option<u64>,
}

impl GatewayQuotas {
    fn values(&self) -> impl Iterator<Item = (&'static [u8], f64)> {
        [
            (PRODUCER_BYTE_RATE, self.producer_byte_rate),
            (CONSUMER_BYTE_RATE, self.consumer_byte_rate),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k, v? as f64)))
    }
}

/// A DescribeClientQuotas request's filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaFilter {
    components: Vec<(Vec<u8>, i8, Option<Vec<u8>>)>,
    strict: bool,
}

/// Reads a request body; None: it does not parse.
pub fn quota_filter(body: &[u8], version: i16) -> Option<QuotaFilter> {
    let f = version >= FIRST_FLEXIBLE;
    let mut c = Cursor::new(body);
    let mut components = Vec::new();
    for _ in 0..c.array_len(f)? {
        let kind = c.string_field(f)??.to_vec();
        let match_type = c.bytes(1)?[0] as i8;
        let name = c.string_field(f)?.map(<[u8]>::to_vec);
        if f {
            c.skip_tagged_fields()?;
        }
        components.push((kind, match_type, name));
    }
    let strict = c.bytes(1)? != [0];
    Some(QuotaFilter { components, strict })
}

impl QuotaFilter {
    /// Whether the filter admits the entity of one (type, name).
    fn admits(&self, kind: &[u8], name: &[u8]) -> bool {
        if self.strict && self.components.is_empty() {
            return false;
        }
        self.components
            .iter()
            .all(|(k, m, n)| k == kind && (*m == ANY || *m == EXACT && n.as_deref() == Some(name)))
    }
}

/// One entity of an entry as the broker wrote it.
struct Entity<'a> {
    kind: &'a [u8],
    name: Option<&'a [u8]>,
}

/// The caller's own entity, to which the gateway's limits belong: its user if the broker
/// authenticated one, else its client id.
fn own<'a>(caller: &Caller<'a>) -> Option<(&'static [u8], &'a [u8])> {
    match (caller.user, caller.client_id) {
        (Some(user), _) => Some((USER, user)),
        (None, Some(id)) => Some((CLIENT_ID, id)),
        (None, None) => None,
    }
}

/// The response for the caller; None if it does not parse or carries an error (then it goes as
/// it is: it names no entity).
pub fn describe_client_quotas(
    frame: &[u8],
    version: i16,
    filter: &QuotaFilter,
    caller: &Caller<'_>,
    gateway: &GatewayQuotas,
) -> Option<Vec<u8>> {
    let f = version >= FIRST_FLEXIBLE;
    let mut c = Cursor::after_response_header(frame, f)?;
    c.i32()?; // throttle
    if c.i16()? != 0 {
        return None;
    }
    c.string_field(f)?; // error message
    let head = c.position();
    let mut out = Vec::with_capacity(frame.len() + 64);
    out.extend_from_slice(frame.get(..head)?);
    let mut entries = Vec::new();
    let mut count = 0usize;
    let mut own_listed = false;
    let own = own(caller);
    for _ in 0..c.array_len(f)? {
        let mut entities = Vec::new();
        for _ in 0..c.array_len(f)? {
            let kind = c.string_field(f)??;
            let name = c.string_field(f)?;
            if f {
                c.skip_tagged_fields()?;
            }
            entities.push(Entity { kind, name });
        }
        let mut values: Vec<(&[u8], f64)> = Vec::new();
        for _ in 0..c.array_len(f)? {
            let key = c.string_field(f)??;
            let value = f64::from_be_bytes(c.bytes(8)?.try_into().ok()?);
            if f {
                c.skip_tagged_fields()?;
            }
            values.push((key, value));
        }
        if f {
            c.skip_tagged_fields()?;
        }
        let callers = entities.iter().all(|e| match (e.kind, e.name) {
            (_, None) => e.kind == USER || e.kind == CLIENT_ID,
            (USER, Some(n)) => caller.user == Some(n),
            (CLIENT_ID, Some(n)) => caller.client_id == Some(n),
            _ => false,
        });
        if !callers || entities.is_empty() {
            continue;
        }
        let is_own = matches!((own, entities.as_slice()), (Some((k, n)), [e]) if e.kind == k && e.name == Some(n));
        own_listed |= is_own;
        if is_own {
            // The gateway's limits in place of the broker's.
            values.retain(|(k, _)| gateway.values().all(|(g, _)| g != *k));
            values.extend(gateway.values().map(|(k, v)| (k as &[u8], v)));
        }
        write_entry(&mut entries, f, &entities, &values);
        count += 1;
    }
    if let Some((kind, name)) = own.filter(|_| !own_listed) {
        if gateway.values().next().is_some() && filter.admits(kind, name) {
            let values: Vec<(&[u8], f64)> = gateway.values().collect();
            write_entry(&mut entries, f, &[Entity { kind, name: Some(name) }], &values);
            count += 1;
        }
    }
    array_len(&mut out, count, f);
    out.extend_from_slice(&entries);
    out.extend_from_slice(frame.get(c.position()..)?);
    let size = i32::try_from(out.len() - 4).ok()?;
    out[..4].copy_from_slice(&size.to_be_bytes());
    Some(out)
}

fn write_entry(out: &mut Vec<u8>, f: bool, entities: &[Entity<'_>], values: &[(&[u8], f64)]) {
    array_len(out, entities.len(), f);
    for e in entities {
        string(out, e.kind, f);
        match e.name {
            Some(n) => string(out, n, f),
            None if f => uvarint(out, 0),
            None => out.extend_from_slice(&(-1i16).to_be_bytes()),
        }
        if f {
            uvarint(out, 0);
        }
    }
    array_len(out, values.len(), f);
    for (k, v) in values {
        string(out, k, f);
        out.extend_from_slice(&v.to_be_bytes());
        if f {
            uvarint(out, 0);
        }
    }
    if f {
        uvarint(out, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Entry<'a> = (Vec<(&'a str, Option<&'a str>)>, Vec<(&'a str, f64)>);

    fn response(version: i16, entries: &[Entry<'_>]) -> Vec<u8> {
        let f = version >= FIRST_FLEXIBLE;
        let mut b = 7i32.to_be_bytes().to_vec();
        if f {
            b.push(0);
        }
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0]); // throttle, error
        if f {
            b.push(0); // null message
        } else {
            b.extend_from_slice(&(-1i16).to_be_bytes());
        }
        let mut body = Vec::new();
        for (entities, values) in entries {
            let entities: Vec<Entity<'_>> = entities
                .iter()
                .map(|(k, n)| Entity {
                    kind: k.as_bytes(),
                    name: n.map(str::as_bytes),
                })
                .collect();
            let values: Vec<(&[u8], f64)> = values.iter().map(|(k, v)| (k.as_bytes(), *v)).collect();
            write_entry(&mut body, f, &entities, &values);
        }
        array_len(&mut b, entries.len(), f);
        b.extend(body);
        if f {
            b.push(0);
        }
        let mut frame = (b.len() as i32).to_be_bytes().to_vec();
        frame.extend(b);
        frame
    }

    fn filter(version: i16, components: &[(&str, i8, Option<&str>)], strict: bool) -> QuotaFilter {
        let f = version >= FIRST_FLEXIBLE;
        let mut b = Vec::new();
        array_len(&mut b, components.len(), f);
        for (k, m, n) in components {
            string(&mut b, k.as_bytes(), f);
            b.push(*m as u8);
            match n {
                Some(n) => string(&mut b, n.as_bytes(), f),
                None if f => b.push(0),
                None => b.extend_from_slice(&(-1i16).to_be_bytes()),
            }
            if f {
                b.push(0);
            }
        }
        b.push(u8::from(strict));
        if f {
            b.push(0);
        }
        quota_filter(&b, version).unwrap()
    }

    const GATEWAY: GatewayQuotas = GatewayQuotas {
        producer_byte_rate: Some(8 << 20),
        consumer_byte_rate: None,
    };

    #[test]
    fn the_caller_sees_its_own_entities_with_the_gateways_limits_and_no_one_elses() {
        for version in [0i16, 1] {
            let broker = response(
                version,
                &[
                    (
                        vec![("client-id", Some("acme-q"))],
                        vec![("producer_byte_rate", 999.0), ("consumer_byte_rate", 5.0)],
                    ),
                    (
                        vec![("client-id", Some("globex-q"))],
                        vec![("producer_byte_rate", 1234.0)],
                    ),
                    (vec![("user", None)], vec![("producer_byte_rate", 5000.0)]),
                    (vec![("ip", Some("10.0.0.1"))], vec![("connection_creation_rate", 3.0)]),
                    (
                        vec![("user", Some("globex-svc")), ("client-id", Some("acme-q"))],
                        vec![("request_percentage", 1.0)],
                    ),
                ],
            );
            let caller = Caller {
                user: None,
                client_id: Some(b"acme-q"),
            };
            let any = filter(version, &[], false);
            let got = describe_client_quotas(&broker, version, &any, &caller, &GATEWAY).unwrap();
            let want = response(
                version,
                &[
                    (
                        vec![("client-id", Some("acme-q"))],
                        vec![("consumer_byte_rate", 5.0), ("producer_byte_rate", 8388608.0)],
                    ),
                    (vec![("user", None)], vec![("producer_byte_rate", 5000.0)]),
                ],
            );
            assert_eq!(got, want, "v{version}");
        }
    }

    #[test]
    fn the_gateways_limits_are_listed_where_the_broker_has_none_if_the_filter_admits_them() {
        let broker = response(1, &[]);
        let caller = Caller {
            user: Some(b"acme-svc"),
            client_id: Some(b"acme-q"),
        };
        let own = response(
            1,
            &[(
                vec![("user", Some("acme-svc"))],
                vec![("producer_byte_rate", 8388608.0)],
            )],
        );
        for (components, strict, listed) in [
            (vec![], false, true),
            (vec![("user", ANY, None)], true, true),
            (vec![("user", EXACT, Some("acme-svc"))], false, true),
            (vec![("user", EXACT, Some("globex-svc"))], false, false),
            (vec![("client-id", ANY, None)], false, false),
            (vec![], true, false),
        ] {
            let got = describe_client_quotas(&broker, 1, &filter(1, &components, strict), &caller, &GATEWAY).unwrap();
            assert_eq!(got == own, listed, "{components:?} strict {strict}");
            if !listed {
                assert_eq!(got, broker);
            }
        }
        let unlimited = GatewayQuotas::default();
        assert_eq!(
            describe_client_quotas(&broker, 1, &filter(1, &[], false), &caller, &unlimited).unwrap(),
            broker,
            "no gateway limit: nothing added"
        );
    }
}
