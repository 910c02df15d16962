//! One Kafka client connection. Requests: attribution (a SASL principal once the broker accepted
//! it; else, for a connection that authenticated in no way, the header's client.id), what the
//! tenant may do (authz.rs: an API the gateway does not pass closes the connection, an admin
//! request is decided against the tenant's grants), and each Produce request decided as a
//! whole against the tenant's limits.
//! Responses: a refused Produce was sent to the broker as an ApiVersions request with the same
//! correlation id (Kafka answers a connection's requests in order), and that answer is replaced
//! by a Produce response carrying the refusal; a delayed Produce's real response reports the
//! delay in throttle_time_ms; ApiVersions answers advertise no Produce or Fetch version the
//! filter cannot read.
//! The read side (limits.consume): each Fetch response's record bytes are charged as it streams
//! by; one that leaves the tenant in debt carries throttle_time_ms until the debt is paid, and
//! the connection's next Fetch is held until then (KIP-219), asking for no more than the bucket
//! holds.

mod authz;
mod brokers;
mod fetch;
mod produce;
mod quotas;

use fetch::Fetching;
use std::collections::HashMap;
use std::rc::Rc;
use weighstation_core::backlog::{Backlog, BacklogPolicy, Standing};
use weighstation_core::carry::{Carry, Plan};
use weighstation_core::config::Protocol;
use weighstation_core::decisions::Decisions;
use weighstation_core::identity::{Authenticated, KafkaPrincipal};
use weighstation_core::kafka::{
    api_versions_request, authenticate_answer, authenticate_step, cap_versions, handshake_mechanism,
    raise_produce_throttle, Batch, Gaps, Interest, Mechanism, QuotaFilter, RequestHandler, RequestHeader,
    RequestStream, ResponseHandler, ResponseStream, Retries, Step, API_DESCRIBE_CLIENT_QUOTAS, API_DESCRIBE_CLUSTER,
    API_FETCH, API_FIND_COORDINATOR, API_METADATA, API_PRODUCE, API_SASL_AUTHENTICATE, API_SASL_HANDSHAKE,
    API_VERSIONS, HORIZON_NS,
};
use weighstation_core::scan::Admission;
use weighstation_core::source::Source;

use crate::backlog::BacklogWait;
use crate::clients::ClientBucket;
use crate::clock::now_ns;
use crate::connection::{self, Connection};
use crate::gatekeeper::{Held, InFlightSlot};
use crate::tenancy::Attribution;
use crate::{state, trust, waiters};

/// What a forwarded request's response must do.
enum Pending {
    /// A Produce the broker saw: free its in-flight slot; report a delay in throttle_time_ms.
    Produced {
        slot: Option<InFlightSlot>,
        version: i16,
        delay_ms: i32,
    },
    /// A refused Produce sent as ApiVersions: answer with this Produce response instead.
    Refused { response: Vec<u8> },
    /// The client's own ApiVersions: cap the Produce version.
    Versions { version: i16 },
    /// Metadata, FindCoordinator or DescribeCluster while the gateway fronts brokers: rewrite
    /// their addresses.
    Addresses { api_key: i16, version: i16 },
    /// A SaslAuthenticate: the broker's answer says whether the claimed principal counts.
    /// `scram_final`: it answers SCRAM's client-final message.
    Authenticate { version: i16, scram_final: bool },
    /// A Fetch of a tenant whose consumers are limited: its records are charged, to the client
    /// bucket of the client that asked too.
    Fetch {
        version: i16,
        client: Option<Rc<ClientBucket>>,
    },
    /// Metadata of a tenant that may not see every topic: its topics filtered, and its
    /// addresses rewritten if `addresses`.
    Metadata {
        version: i16,
        all_topics: bool,
        addresses: bool,
    },
    /// DescribeTopicPartitions of a tenant that may not see every topic: filtered.
    TopicPartitions { all_topics: bool },
    /// DescribeClientQuotas: answered for the caller's own entities (quotas.rs).
    ClientQuotas {
        version: i16,
        filter: QuotaFilter,
        client_id: Option<Vec<u8>>,
    },
}

/// DescribeTopicPartitions (KIP-966): what Admin describeTopics reads.
const API_DESCRIBE_TOPIC_PARTITIONS: i16 = 75;

/// The longest throttle_time_ms a refusal tells: as far ahead as rate is set aside for a retry.
const MAX_THROTTLE_MS: i32 = (HORIZON_NS / 1_000_000) as i32;

/// A wait as throttle_time_ms, rounded up: a client that waits it finds the request admissible.
fn throttle_ms(ns: u64) -> i32 {
    i32::try_from(ns.div_ceil(1_000_000)).unwrap_or(i32::MAX)
}

struct Conn {
    id: u32,
    who: Attribution,
    held: Held,
    pending: HashMap<i32, Pending>,
    /// The connection is over its tenant's connection limit.
    refused: bool,
    /// Rate set aside for the retries of refused Produce requests.
    retries: Retries,
    /// Partitions whose idempotent sequence has a refused batch not yet sent again.
    gaps: Gaps,
    /// The batches of the Produce being decided (kept to reuse its allocation).
    batches: Vec<Batch>,
    /// The Produce's topics as (offset in the body, length, records), kept for the usage report
    /// while reporting is on (reused, like `batches`).
    topics: Vec<(usize, usize, u64)>,
    /// A Produce's topic names while its headers are walked (reused, like `batches`).
    topic: Vec<u8>,
    /// Whether the tenant may produce to a topic, decided once per topic.
    produce_decisions: Decisions<bool>,
    /// The SASL mechanism of the connection's SaslHandshake.
    mechanism: Mechanism,
    /// Who the client's SaslAuthenticate says it is, until the broker answers.
    claimed: Option<KafkaPrincipal>,
    /// Since when the connection's next Fetch has been held for its tenant's consume debt.
    fetch_held: Option<u64>,
    /// The overrides with consume buckets of the Fetch being decided (reused).
    fetch_overrides: Vec<usize>,
    fetching: Option<Fetching>,
    /// The listener's filter chain, read once a response names brokers (brokers.rs).
    chain: Option<Option<String>>,
    /// The refusal responses the client is owed (weighstation_core::backlog).
    backlog: Backlog,
    backlog_wait: BacklogWait,
}

impl Conn {
    /// A request's client id: it attributes a connection that authenticated in no way, and
    /// names the client whose connection it is.
    fn observe(&mut self, client_id: Option<&[u8]>) {
        let who = &mut self.who;
        if let Err(why) = who
            .claimed_client_id(client_id)
            .and_then(|()| who.client_connection(client_id))
        {
            log::info!("weighstation: kafka connection refused: {why}");
            self.refused = true;
        }
    }

    /// The client's SaslAuthenticate: remember who it claims to be until the broker answers.
    fn authenticating(&mut self, h: &RequestHeader<'_>, body: Option<&[u8]>) {
        let step = body.map_or(Step::Other, |b| authenticate_step(b, h.api_version, self.mechanism));
        let scram_final = step == Step::ScramFinal;
        if let Step::Claims(principal) = step {
            self.claimed = Some(principal);
        }
        let pending = Pending::Authenticate {
            version: h.api_version,
            scram_final,
        };
        self.pending.insert(h.correlation_id, pending);
    }

    /// The broker's SaslAuthenticate answer. An accepted principal is committed when the
    /// exchange is complete: PLAIN and OAUTHBEARER when the broker's message is empty (an
    /// OAUTHBEARER refusal starts with error_code 0 and an error message), SCRAM when its
    /// client-final message was accepted.
    fn authenticated(&mut self, frame: &[u8], version: i16, scram_final: bool) {
        let Some(answer) = authenticate_answer(frame, version) else {
            return;
        };
        if !answer.accepted() {
            self.claimed = None;
            trust::authentication_failed(Protocol::Kafka);
            return;
        }
        let complete = match self.mechanism {
            Mechanism::Scram => scram_final,
            _ => answer.final_message,
        };
        let Some(principal) = self.claimed.take_if(|_| complete) else {
            return;
        };
        if let Err(why) = self.who.authenticated(Authenticated::Kafka(principal)) {
            log::info!("weighstation: kafka connection refused: {why}");
            self.refused = true;
        }
    }

    /// Refuses a request: the broker answers a stand-in ApiVersions request with the same
    /// correlation id, and `response` takes its answer's place.
    fn answer_refused(&mut self, h: &RequestHeader<'_>, response: Vec<u8>) -> Admission {
        self.backlog.owe(response.len());
        self.pending.insert(h.correlation_id, Pending::Refused { response });
        Admission::Replace(api_versions_request(h.correlation_id, h.client_id))
    }

    /// Holds a client the gateway owes too much, or ends it as a slow consumer (Err).
    fn check_backlog(&mut self, policy: BacklogPolicy, held: bool, client_id: &[u8]) -> Result<(), &'static str> {
        // The clock is read only while something is owed: a read costs no host call otherwise.
        let standing = match self.backlog.owed() > 0 {
            false => Standing::Open,
            true => self.backlog.standing(now_ns(), policy.deadline_ns()),
        };
        let client = self.who.client_name(Some(client_id));
        self.backlog_wait
            .apply(standing, held, self.id, &self.who, client, Protocol::Kafka)
    }

    fn release(&mut self, slot: Option<InFlightSlot>) {
        if let Some(slot) = slot {
            slot.finished(self.who.current());
        }
    }
}

struct Requests<'a> {
    conn: &'a mut Conn,
    /// Envoy's clock, read once a Produce or Fetch is decided.
    now: Option<u64>,
    /// The most the Fetch just forwarded may ask for.
    fetch_most: Option<i32>,
}

impl RequestHandler for Requests<'_> {
    fn request(&mut self, h: &RequestHeader<'_>, body: Option<&mut dyn Source>) -> Admission {
        match h.api_key {
            // The handshake that precedes authentication: the connection is nobody's but the
            // default tenant's (or its certificate's) yet, whatever client id it claims.
            API_VERSIONS | API_SASL_HANDSHAKE | API_SASL_AUTHENTICATE => self.conn.who.ensure_attributed(),
            _ => self.conn.observe(h.client_id),
        }
        let mut body = body;
        if let Some(admission) = self.conn.authorize(h, body.as_deref_mut()) {
            return admission;
        }
        match (h.api_key, body) {
            (API_SASL_HANDSHAKE, Some(body)) => {
                self.conn.mechanism = handshake_mechanism(body.all());
                Admission::Forward
            }
            (API_SASL_AUTHENTICATE, body) => {
                self.conn.authenticating(h, body.map(|b| b.all()));
                Admission::Forward
            }
            (API_PRODUCE, Some(body)) if !self.conn.refused => {
                let now = *self.now.get_or_insert_with(now_ns);
                self.conn.produce(h, body, now)
            }
            (API_METADATA, Some(body)) => self.conn.metadata(h, body),
            (API_DESCRIBE_TOPIC_PARTITIONS, Some(body)) => self.conn.describe_topic_partitions(h, body.all()),
            (API_DESCRIBE_CLIENT_QUOTAS, Some(body)) => self.conn.describe_client_quotas(h, body.all()),
            (API_FETCH, Some(body)) if !self.conn.refused => {
                let now = *self.now.get_or_insert_with(now_ns);
                let (admission, most) = self.conn.fetch(h, body, now);
                self.fetch_most = most;
                admission
            }
            (API_VERSIONS, _) => {
                self.conn
                    .pending
                    .insert(h.correlation_id, Pending::Versions { version: h.api_version });
                Admission::Forward
            }
            (API_FIND_COORDINATOR | API_DESCRIBE_CLUSTER, _) if self.conn.rewrites_brokers() => {
                let p = Pending::Addresses {
                    api_key: h.api_key,
                    version: h.api_version,
                };
                self.conn.pending.insert(h.correlation_id, p);
                Admission::Forward
            }
            _ => Admission::Forward,
        }
    }

    fn fetch_most(&self) -> Option<i32> {
        self.fetch_most
    }

    fn backlogged(&self, at: usize, rest: usize) -> bool {
        self.conn.backlog.holds(at, rest)
    }
}

struct Responses<'a> {
    conn: &'a mut Conn,
    /// Envoy's clock, read once a Fetch response is charged.
    now: Option<u64>,
}

impl Responses<'_> {
    fn now(&mut self) -> u64 {
        *self.now.get_or_insert_with(now_ns)
    }
}

impl ResponseHandler for Responses<'_> {
    fn arriving(&mut self, correlation_id: i32, _size: usize) -> Interest {
        let endpoints = match self.conn.pending.get(&correlation_id) {
            Some(&Pending::Produced { version, .. }) => self.conn.reads_produce_endpoints(version),
            _ => false,
        };
        match self.conn.pending.get(&correlation_id) {
            None => Interest::Pass,
            Some(Pending::Produced { delay_ms: 0, .. }) if !endpoints => {
                if let Some(Pending::Produced { slot, .. }) = self.conn.pending.remove(&correlation_id) {
                    self.conn.release(slot);
                }
                Interest::Pass
            }
            Some(&Pending::Fetch { version, .. }) => {
                if let Some(Pending::Fetch { client, .. }) = self.conn.pending.remove(&correlation_id) {
                    self.conn.fetch_answered(client);
                }
                Interest::Fetch(version)
            }
            Some(_) => Interest::Whole,
        }
    }

    fn fetch_head(&mut self, size: usize, _throttle_ms: i32) -> Option<i32> {
        let now = self.now();
        self.conn.fetch_arrived(size, now)
    }

    fn fetch_records(&mut self, topic: &[u8], bytes: u64) {
        let now = self.now();
        self.conn.fetch_records(topic, bytes, now);
    }

    fn fetch_done(&mut self, complete: bool) {
        let now = self.now();
        self.conn.fetch_done(complete, now);
    }

    fn response(&mut self, correlation_id: i32, frame: &[u8]) -> Option<Vec<u8>> {
        match self.conn.pending.remove(&correlation_id)? {
            Pending::Refused { response } => {
                self.conn.backlog.paid(response.len());
                Some(response)
            }
            Pending::Produced {
                slot,
                version,
                delay_ms,
            } => {
                self.conn.release(slot);
                let rewritten = self.conn.rewrite_produce_endpoints(frame, version);
                if delay_ms == 0 {
                    return rewritten;
                }
                let mut patched = rewritten.unwrap_or_else(|| frame.to_vec());
                raise_produce_throttle(&mut patched, version, delay_ms).map(|()| patched)
            }
            Pending::Versions { version } => {
                let mut patched = frame.to_vec();
                cap_versions(&mut patched, version).map(|()| patched)
            }
            Pending::Addresses { api_key, version } => self.conn.rewrite_addresses(frame, api_key, version),
            Pending::Metadata {
                version,
                all_topics,
                addresses,
            } => self.conn.metadata_answered(frame, version, all_topics, addresses),
            Pending::TopicPartitions { all_topics } => self.conn.topic_partitions_answered(frame, all_topics),
            Pending::ClientQuotas {
                version,
                filter,
                client_id,
            } => self
                .conn
                .client_quotas_answered(frame, version, &filter, client_id.as_deref()),
            Pending::Authenticate { version, scram_final } => {
                self.conn.authenticated(frame, version, scram_final);
                None
            }
            Pending::Fetch { .. } => None,
        }
    }
}

/// The largest Produce (or SASL) request the filter reads whole to decide it; a
/// larger one is passed through after its header.
const HOLD_LIMIT: usize = 4 << 20;

/// A request being read whole is carried until complete; behind a held request, sarama's
/// pipelining (five requests at most by default) is what is carried.
const KAFKA_CARRY_LIMIT: usize = HOLD_LIMIT + (1 << 20);
type KafkaCarry = Carry<KAFKA_CARRY_LIMIT>;

/// A Kafka connection's state.
pub struct State {
    conn: Conn,
    requests: RequestStream,
    responses: ResponseStream,
    carry: KafkaCarry,
    /// The configuration's backlog bound and deadline, read at the start and after a reload.
    backlog: Option<BacklogPolicy>,
}

impl State {
    /// Scans what Envoy holds, behind any carried bytes (see weighstation_core::carry); Err
    /// closes.
    fn client_data(&mut self, envoy: &mut dyn Source) -> Result<Plan, &'static str> {
        self.conn.who.read_certificate();
        if self.conn.who.refresh() || self.backlog.is_none() {
            let policy = state::active(Protocol::Kafka).map(|c| c.backlog).unwrap_or_default();
            self.conn.backlog.set_limit(policy.max_bytes);
            self.backlog = Some(policy);
        }
        let State {
            conn, requests, carry, ..
        } = self;
        let (plan, forwarded) = carry.scan(envoy, |buf| {
            requests.process(
                buf,
                &mut Requests {
                    conn,
                    now: None,
                    fetch_most: None,
                },
            )
        })?;
        requests.forwarded(forwarded);
        let policy = self.backlog.unwrap_or_default();
        let held = matches!(plan, Plan::Hold { .. });
        self.conn.check_backlog(policy, held, self.requests.client_id())?;
        Ok(plan)
    }

    fn close(&mut self) {
        let slots: Vec<Option<InFlightSlot>> = self
            .conn
            .pending
            .drain()
            .filter_map(|(_, p)| match p {
                Pending::Produced { slot, .. } => Some(slot),
                _ => None,
            })
            .collect();
        for slot in slots {
            self.conn.release(slot);
        }
        if let Some(who) = self.conn.who.current() {
            self.conn.held.end(who, self.conn.id);
        }
        waiters::forget(self.conn.id);
        self.conn.who.closed();
    }
}

/// A Kafka connection's stream context.
pub fn connection(context_id: u32) -> Connection<State> {
    Connection::new(
        context_id,
        State {
            conn: Conn {
                id: context_id,
                who: Attribution::new(Protocol::Kafka),
                held: Held::default(),
                pending: HashMap::new(),
                refused: false,
                retries: Retries::default(),
                gaps: Gaps::default(),
                batches: Vec::new(),
                topics: Vec::new(),
                topic: Vec::new(),
                produce_decisions: Decisions::default(),
                mechanism: Mechanism::default(),
                claimed: None,
                fetch_held: None,
                fetch_overrides: Vec::new(),
                fetching: None,
                chain: None,
                backlog: Backlog::default().carrying(KAFKA_CARRY_LIMIT).watching_anything(),
                backlog_wait: BacklogWait::default(),
            },
            requests: RequestStream::new(HOLD_LIMIT),
            responses: ResponseStream::default(),
            carry: KafkaCarry::default(),
            backlog: None,
        },
    )
}

impl connection::Protocol for State {
    fn client_data(&mut self, envoy: &mut dyn Source) -> Result<Plan, &'static str> {
        let plan = State::client_data(self, envoy);
        if self.conn.refused {
            // Kafka has no way to say "too many connections": a broker's answer is to close.
            return Err("over the tenant's connection limit");
        }
        plan
    }

    fn server_data(&mut self, buf: &mut dyn Source) -> Option<Vec<u8>> {
        let State { conn, responses, .. } = self;
        responses.process(buf, &mut Responses { conn, now: None })
    }

    fn release_held(&mut self) -> bool {
        self.conn.backlog.released()
    }

    fn close(&mut self) {
        State::close(self);
    }
}
