//! A Kafka client matches responses to requests by order as much as by correlation id, so a
//! connection's responses must reach it in request order whatever the filter decides for each
//! request and however the bytes are split into reads. The core's Carry, RequestStream and
//! ResponseStream are driven here as envoy/src/kafka_conn.rs, connection.rs and paused.rs drive
//! them, with the limiter replaced by a verdict drawn for each Produce request: a refused
//! Produce goes to the broker as an ApiVersions request with its correlation id and that
//! answer is swapped for a Produce response carrying the refusal; a refused acks=0 Produce is
//! dropped; a held Produce is tried again with the next read or on a tick, and a delayed one's
//! answer reports the delay in throttle_time_ms.

use super::produce::tests::{batch, produce_body};
use super::produce::BATCH_HEADER_LEN;
use crate::carry::{Carry, Plan};
use crate::kafka::{
    api_versions_request, produce_response, raise_produce_throttle, visit_produce, Interest, PartitionError,
    RequestHandler, RequestHeader, RequestStream, ResponseHandler, ResponseStream, API_METADATA, API_PRODUCE,
    API_VERSIONS, FIRST_FLEXIBLE_PRODUCE, MAX_PRODUCE_VERSION, MIN_PRODUCE_VERSION, THROTTLING_QUOTA_EXCEEDED,
};
use crate::scan::Admission;
use crate::source::{Ranges, Source, Whole};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use std::collections::HashMap;

/// Requests the filter only frames: Fetch, and ConsumerGroupHeartbeat, which it has no name for.
const FETCH: i16 = 1;
const CONSUMER_GROUP_HEARTBEAT: i16 = 68;

const TOPIC: &str = "orders";

/// A Produce request is held on at most this many attempts before it is decided.
const MAX_HOLDS: u8 = 3;
/// The delay the simulated limiter reports per hold, in throttle_time_ms.
const HOLD_MS: i32 = 20;
/// What a refusal tells the client: when to retry, and why.
const REFUSAL_THROTTLE_MS: i32 = 250;
const REFUSAL_MESSAGE: &[u8] = b"over the tenant's rate";

/// kafka_conn.rs reads Produce requests of up to 4 MiB whole; every one generated here fits.
const HOLD_LIMIT: usize = 1 << 20;
/// Far below kafka_conn.rs's, so that what stands behind a held request is sometimes carried
/// and sometimes left in Envoy's buffer (see carry.rs).
type KafkaCarry = Carry<256>;

/// What the limiter decides for one Produce request: hold it on this many attempts, then admit
/// or refuse it.
#[derive(Debug, Clone, Copy)]
struct Verdict {
    holds: u8,
    refuse: bool,
}

#[derive(Debug, Clone)]
enum Kind {
    Produce {
        version: i16,
        acks: i16,
        partition: i32,
        records: i32,
        /// Bytes of the record batch beyond its header.
        padding: usize,
        verdict: Verdict,
    },
    /// Any other request: the filter reads its header only.
    Other { api_key: i16, version: i16, body: Vec<u8> },
}

#[derive(Debug, Clone)]
struct Request {
    correlation_id: i32,
    client_id: Option<String>,
    kind: Kind,
}

impl Request {
    fn frame(&self) -> Vec<u8> {
        let (api_key, version) = match self.kind {
            Kind::Produce { version, .. } => (API_PRODUCE, version),
            Kind::Other { api_key, version, .. } => (api_key, version),
        };
        let mut f = api_key.to_be_bytes().to_vec();
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&self.correlation_id.to_be_bytes());
        match &self.client_id {
            Some(id) => {
                f.extend_from_slice(&(id.len() as i16).to_be_bytes());
                f.extend_from_slice(id.as_bytes());
            }
            None => f.extend_from_slice(&(-1i16).to_be_bytes()),
        }
        match &self.kind {
            Kind::Produce {
                version,
                acks,
                partition,
                records,
                padding,
                ..
            } => {
                if *version >= FIRST_FLEXIBLE_PRODUCE {
                    f.push(0); // request header v2: no tagged fields
                }
                let records = batch(*records, BATCH_HEADER_LEN + padding);
                f.extend(produce_body(*version, TOPIC, *acks, &[(*partition, records)]));
            }
            Kind::Other {
                api_key, version, body, ..
            } => {
                let read_flexible = crate::kafka::authz::api_of(*api_key).is_some_and(|a| a.flexible(*version));
                if (*api_key == FETCH && *version >= 12) || read_flexible {
                    f.push(0); // request header v2, as the flexible versions the filter reads use
                }
                f.extend_from_slice(body);
            }
        }
        framed(f)
    }

    /// What the broker must be sent for this request, and what the client must get back.
    fn expected(&self) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        let corr = self.correlation_id;
        let (version, acks, partition, verdict) = match self.kind {
            Kind::Produce {
                version,
                acks,
                partition,
                verdict,
                ..
            } => (version, acks, partition, verdict),
            Kind::Other { api_key, .. } => return (Some(self.frame()), Some(broker_answer(api_key, corr))),
        };
        let answer = |error, throttle_ms, message| {
            let partitions = vec![PartitionError { partition, error }];
            produce_response(
                version,
                corr,
                &[(TOPIC.as_bytes().to_vec(), partitions)],
                throttle_ms,
                message,
            )
        };
        match (verdict.refuse, acks) {
            (true, 0) => (None, None),
            (true, _) => (
                Some(api_versions_request(corr, self.client_id.as_deref().map(str::as_bytes))),
                Some(answer(
                    THROTTLING_QUOTA_EXCEEDED,
                    REFUSAL_THROTTLE_MS,
                    Some(REFUSAL_MESSAGE),
                )),
            ),
            (false, 0) => (Some(self.frame()), None),
            (false, _) => (
                Some(self.frame()),
                Some(answer(0, i32::from(verdict.holds) * HOLD_MS, None)),
            ),
        }
    }
}

fn framed(body: Vec<u8>) -> Vec<u8> {
    let mut f = (body.len() as i32).to_be_bytes().to_vec();
    f.extend(body);
    f
}

/// The broker's answer to anything but a Produce: only its correlation id matters.
fn broker_answer(api_key: i16, correlation_id: i32) -> Vec<u8> {
    let mut b = correlation_id.to_be_bytes().to_vec();
    b.extend_from_slice(format!("answer to api key {api_key}").as_bytes());
    framed(b)
}

fn be_i16(b: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The first complete frame (size prefix included) of `buf`, and what follows it.
fn split_frame(buf: &[u8]) -> Option<(&[u8], &[u8])> {
    let size = usize::try_from(be_i32(buf, 0)?).ok()?;
    (buf.len() >= 4 + size).then(|| buf.split_at(4 + size))
}

/// Every complete frame of `buf`, and the bytes left over.
fn frames(mut buf: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut all = Vec::new();
    while let Some((frame, rest)) = split_frame(buf) {
        all.push(frame);
        buf = rest;
    }
    (all, buf)
}

/// A request frame's api key and correlation id.
fn request_id(frame: &[u8]) -> Option<(i16, i32)> {
    Some((be_i16(frame, 4)?, be_i32(frame, 8)?))
}

/// A response frame's correlation id.
fn response_id(frame: &[u8]) -> Option<i32> {
    be_i32(frame, 4)
}

/// The broker answers every request, in the order it reads them, except a Produce with acks=0.
#[derive(Default)]
struct Broker {
    /// Bytes read that do not make a whole frame yet.
    partial: Vec<u8>,
    frames: Vec<Vec<u8>>,
    /// Answers the filter has not read yet.
    answers: Vec<u8>,
}

impl Broker {
    fn receive(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        let (complete, rest) = frames(&self.partial);
        for frame in &complete {
            if let Some(answer) = Self::answer(frame) {
                self.answers.extend(answer);
            }
        }
        self.frames.extend(complete.iter().map(|f| f.to_vec()));
        self.partial = rest.to_vec();
    }

    /// An unreadable request gets no answer: what the broker got is compared byte for byte.
    fn answer(frame: &[u8]) -> Option<Vec<u8>> {
        let (api_key, corr) = request_id(frame)?;
        if api_key != API_PRODUCE {
            return Some(broker_answer(api_key, corr));
        }
        let version = be_i16(frame, 6)?;
        let client_id_len = usize::try_from(be_i16(frame, 12)?).unwrap_or(0);
        let header_tags = usize::from(version >= FIRST_FLEXIBLE_PRODUCE);
        let body = frame.get(14 + client_id_len + header_tags..)?;
        let mut topics: Vec<(Vec<u8>, Vec<PartitionError>)> = Vec::new();
        let summary = visit_produce(&mut Whole(body), version, &mut Vec::new(), |p| {
            let partition = PartitionError {
                partition: p.partition,
                error: 0,
            };
            topics.push((p.topic.to_vec(), vec![partition]));
        })
        .ok()?;
        (summary.acks != 0).then(|| produce_response(version, corr, &topics, 0, None))
    }
}

/// kafka_conn.rs's record of what a forwarded request's response must do, for the two cases
/// that replace a response.
enum Pending {
    /// A refused Produce sent as ApiVersions: answer with this Produce response instead.
    Refused(Vec<u8>),
    /// A Produce admitted after holds: its response reports the delay.
    Delayed { version: i16, delay_ms: i32 },
}

/// A Produce's verdict, and how many times it was asked for.
struct Decision {
    verdict: Verdict,
    attempts: u8,
}

/// kafka_conn.rs's Conn, its limiter replaced by the drawn verdicts.
struct Glue {
    decisions: HashMap<i32, Decision>,
    pending: HashMap<i32, Pending>,
}

impl RequestHandler for Glue {
    fn request(&mut self, h: &RequestHeader<'_>, body: Option<&mut dyn Source>) -> Admission {
        let (API_PRODUCE, Some(body)) = (h.api_key, body) else {
            return Admission::Forward;
        };
        let mut refusal: Vec<(Vec<u8>, Vec<PartitionError>)> = Vec::new();
        let summary = visit_produce(body, h.api_version, &mut Vec::new(), |p| {
            let partition = PartitionError {
                partition: p.partition,
                error: THROTTLING_QUOTA_EXCEEDED,
            };
            match refusal.last_mut() {
                Some((name, parts)) if name.as_slice() == p.topic => parts.push(partition),
                _ => refusal.push((p.topic.to_vec(), vec![partition])),
            }
        });
        // As kafka_conn.rs, a Produce that cannot be read or judged is forwarded: if that is
        // wrong, the broker gets something other than what it must.
        let (Ok(summary), Some(decision)) = (summary, self.decisions.get_mut(&h.correlation_id)) else {
            return Admission::Forward;
        };
        decision.attempts = decision.attempts.saturating_add(1);
        let Verdict { holds, refuse } = decision.verdict;
        if decision.attempts <= holds {
            return Admission::Hold;
        }
        let awaits_reply = summary.acks != 0;
        if !refuse {
            if awaits_reply && holds > 0 {
                let delay_ms = i32::from(holds) * HOLD_MS;
                let version = h.api_version;
                self.pending
                    .insert(h.correlation_id, Pending::Delayed { version, delay_ms });
            }
            return Admission::Forward;
        }
        if !awaits_reply {
            return Admission::Replace(Vec::new());
        }
        let response = produce_response(
            h.api_version,
            h.correlation_id,
            &refusal,
            REFUSAL_THROTTLE_MS,
            Some(REFUSAL_MESSAGE),
        );
        self.pending.insert(h.correlation_id, Pending::Refused(response));
        Admission::Replace(api_versions_request(h.correlation_id, h.client_id))
    }
}

impl ResponseHandler for Glue {
    fn arriving(&mut self, correlation_id: i32, _size: usize) -> Interest {
        if self.pending.contains_key(&correlation_id) {
            Interest::Whole
        } else {
            Interest::Pass
        }
    }

    fn response(&mut self, correlation_id: i32, frame: &[u8]) -> Option<Vec<u8>> {
        match self.pending.remove(&correlation_id)? {
            Pending::Refused(response) => Some(response),
            Pending::Delayed { version, delay_ms } => {
                let mut patched = frame.to_vec();
                raise_produce_throttle(&mut patched, version, delay_ms).map(|()| patched)
            }
        }
    }
}

/// One connection through the filter: Envoy's buffer of client bytes, the filter's state, the
/// broker, and what the client got back.
struct Connection {
    /// Client bytes Envoy holds for the filter: read and not passed on.
    envoy_buffer: Vec<u8>,
    /// The filter's last plan held something: Envoy presents it again on a tick.
    paused: bool,
    glue: Glue,
    requests: RequestStream,
    responses: ResponseStream,
    carry: KafkaCarry,
    broker: Broker,
    to_client: Vec<u8>,
}

impl Connection {
    fn new(requests: &[Request]) -> Self {
        let decisions = requests
            .iter()
            .filter_map(|r| match r.kind {
                Kind::Produce { verdict, .. } => Some((r.correlation_id, Decision { verdict, attempts: 0 })),
                Kind::Other { .. } => None,
            })
            .collect();
        Connection {
            envoy_buffer: Vec::new(),
            paused: false,
            glue: Glue {
                decisions,
                pending: HashMap::new(),
            },
            requests: RequestStream::new(HOLD_LIMIT),
            responses: ResponseStream::default(),
            carry: KafkaCarry::default(),
            broker: Broker::default(),
            to_client: Vec::new(),
        }
    }

    /// State::client_data on what Envoy holds, the plan applied as paused.rs does (a Forward
    /// passes the buffer on, from a callback by Continue, from a tick by resuming), and what is
    /// passed on sent to the broker. A read and a tick differ only in the bytes Envoy added.
    fn client_data(&mut self) -> Result<(), TestCaseError> {
        let Connection {
            glue, requests, carry, ..
        } = self;
        let (plan, forwarded) = carry
            .scan(&mut Ranges::new(&self.envoy_buffer), |buf| requests.process(buf, glue))
            .map_err(|why| TestCaseError::fail(format!("the filter closed the connection: {why}")))?;
        requests.forwarded(forwarded);
        let (buffer, pass_on, paused) = match plan {
            Plan::Forward(buffer) => (buffer, true, false),
            Plan::Hold { buffer, resume } => (buffer, resume, true),
        };
        self.paused = paused;
        if let Some(b) = buffer {
            self.envoy_buffer = b;
        }
        if pass_on {
            self.broker.receive(&std::mem::take(&mut self.envoy_buffer));
        }
        Ok(())
    }

    fn client_read(&mut self, bytes: &[u8]) -> Result<(), TestCaseError> {
        self.envoy_buffer.extend_from_slice(bytes);
        self.client_data()
    }

    /// The waiters registry retries a held connection; one that holds nothing is not retried.
    fn tick(&mut self) -> Result<(), TestCaseError> {
        if self.paused {
            self.client_data()?;
        }
        Ok(())
    }

    /// One read of up to `size` bytes of the broker's answers, through State::server_data.
    fn broker_read(&mut self, size: usize) {
        let n = size.min(self.broker.answers.len());
        if n == 0 {
            return;
        }
        let read: Vec<u8> = self.broker.answers.drain(..n).collect();
        match self.responses.process(&mut Ranges::new(&read), &mut self.glue) {
            Some(replaced) => self.to_client.extend(replaced),
            None => self.to_client.extend(read),
        }
    }
}

/// One client read of this many bytes, the ticks that follow it, then one read of the broker's
/// answers.
#[derive(Debug, Clone, Copy)]
struct Step {
    client_read: usize,
    ticks: u8,
    broker_read: usize,
}

fn read_size() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..8, 8usize..300]
}

fn verdict() -> impl Strategy<Value = Verdict> {
    (prop_oneof![2 => Just(0), 1 => 1..=MAX_HOLDS], any::<bool>()).prop_map(|(holds, refuse)| Verdict { holds, refuse })
}

fn kind() -> impl Strategy<Value = Kind> {
    let produce = (
        MIN_PRODUCE_VERSION..=MAX_PRODUCE_VERSION,
        select(vec![0i16, 1, -1]),
        0i32..8,
        1i32..=5,
        0usize..100,
        verdict(),
    )
        .prop_map(|(version, acks, partition, records, padding, verdict)| Kind::Produce {
            version,
            acks,
            partition,
            records,
            padding,
            verdict,
        });
    let other = (
        select(vec![API_METADATA, API_VERSIONS, FETCH, CONSUMER_GROUP_HEARTBEAT]),
        0i16..=12,
        vec(any::<u8>(), 0..48),
    )
        .prop_map(|(api_key, version, body)| Kind::Other { api_key, version, body });
    prop_oneof![3 => produce, 2 => other]
}

/// 1 to 39 requests with increasing correlation ids.
fn requests() -> impl Strategy<Value = Vec<Request>> {
    let request = (1i32..=3, proptest::option::of("[a-z0-9-]{0,12}"), kind());
    (0i32..1_000_000, vec(request, 1..40)).prop_map(|(first, specs)| {
        let mut correlation_id = first;
        specs
            .into_iter()
            .map(|(gap, client_id, kind)| {
                correlation_id += gap;
                Request {
                    correlation_id,
                    client_id,
                    kind,
                }
            })
            .collect()
    })
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = (read_size(), prop_oneof![3 => Just(0u8), 1 => 1u8..=2], read_size());
    vec(step, 1..48).prop_map(|steps| {
        steps
            .into_iter()
            .map(|(client_read, ticks, broker_read)| Step {
                client_read,
                ticks,
                broker_read,
            })
            .collect()
    })
}

proptest! {
    /// Every request reaches the broker once, in order, as sent (a refused Produce as its
    /// ApiVersions stand-in, a refused acks=0 Produce not at all), and the client gets exactly
    /// one response per request that expects one, in request order, a refusal carrying
    /// THROTTLING_QUOTA_EXCEEDED, while reads of either direction are cut anywhere and the
    /// broker answers as requests arrive.
    #[test]
    fn responses_reach_the_client_in_request_order(requests in requests(), steps in steps()) {
        let stream: Vec<u8> = requests.iter().flat_map(Request::frame).collect();
        let mut conn = Connection::new(&requests);
        let mut unread = stream.as_slice();
        for step in &steps {
            let (read, rest) = unread.split_at(step.client_read.min(unread.len()));
            unread = rest;
            // Envoy calls the filter for non-empty reads only.
            if !read.is_empty() {
                conn.client_read(read)?;
            }
            for _ in 0..step.ticks {
                conn.tick()?;
            }
            conn.broker_read(step.broker_read);
        }
        if !unread.is_empty() {
            conn.client_read(unread)?;
        }
        // With every byte read, each tick is an attempt at the held request.
        for _ in 0..requests.len() * usize::from(MAX_HOLDS) {
            conn.tick()?;
        }
        prop_assert!(!conn.paused, "still holding after every verdict was spent");
        for size in steps.iter().map(|s| s.broker_read).cycle() {
            if conn.broker.answers.is_empty() {
                break;
            }
            conn.broker_read(size);
        }

        let (to_broker, to_client): (Vec<_>, Vec<_>) = requests.iter().map(Request::expected).unzip();
        let to_broker: Vec<Vec<u8>> = to_broker.into_iter().flatten().collect();
        let to_client: Vec<Vec<u8>> = to_client.into_iter().flatten().collect();
        prop_assert!(conn.broker.partial.is_empty(), "the broker got part of a request");
        prop_assert_eq!(
            conn.broker.frames.iter().map(|f| request_id(f)).collect::<Vec<_>>(),
            to_broker.iter().map(|f| request_id(f)).collect::<Vec<_>>(),
            "the requests the broker got (api key, correlation id)"
        );
        prop_assert!(conn.broker.frames == to_broker, "a request reached the broker altered");

        let (responses, partial) = frames(&conn.to_client);
        prop_assert!(partial.is_empty(), "the client got part of a response");
        prop_assert_eq!(
            responses.iter().map(|f| response_id(f)).collect::<Vec<_>>(),
            to_client.iter().map(|f| response_id(f)).collect::<Vec<_>>(),
            "the correlation ids of the responses the client got"
        );
        for (got, want) in responses.iter().zip(&to_client) {
            prop_assert_eq!(*got, want.as_slice(), "the response to {:?}", response_id(want));
        }
        prop_assert!(conn.glue.pending.is_empty(), "a response the glue waits for never came");
    }
}
