//! The filter configuration compiled by the control plane (control-plane/internal/compile).
//! Parsed once per reconfiguration, never on the data path.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::attribution::Directory;
pub use crate::attribution::{Identify, TenantId};
use crate::backlog::BacklogPolicy;
use crate::clients::{Clients, ClientsPlan};
use crate::consume::ConsumeLimit;
use crate::identity::Identity;
use crate::kafka;
use crate::leases::Scope;
pub use crate::limits::Limits;
use crate::limits::RateLimit;
use crate::nats;
use crate::patterns;
pub use crate::protocol::Protocol;
use crate::quota::QuotaService;
use crate::report::Reports;

mod delta;
mod frame;
mod reuse;
use frame::Frame;
pub use reuse::Tenants;
use reuse::{Parsed, TenantKey, TenantsByJson};

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Override {
    pub patterns: Vec<String>,
    pub limits: Limits,
}

impl Tenant {
    /// A global tenant's in-flight and connection limits (and its named clients') are divided evenly among the live replicas (rounded up): they bound concurrency,
    /// which cannot be borrowed between processes the way a rate's tokens can. Queue bounds stay per process: they bound what
    /// this Envoy holds in memory.
    fn split_concurrency(&mut self, replicas: u64) {
        let split = |l: &mut Option<u64>| *l = l.map(|n| n.div_ceil(replicas));
        split(&mut self.limits.in_flight);
        split(&mut self.limits.connections);
        for o in &mut self.overrides {
            split(&mut o.limits.in_flight);
        }
        // A named client's bucket is the tenant's across replicas; the pool's are per replica.
        for n in self.clients.iter_mut().flat_map(|c| &mut c.named) {
            split(&mut n.limits.in_flight);
            split(&mut n.limits.connections);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tenant {
    pub name: String,
    /// The LimitPolicy's metadata.name (decision events name it).
    #[serde(default)]
    pub policy: String,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub reject: bool,
    /// The tenant's limits hold across every gateway replica together (policy `scope: global`).
    #[serde(default)]
    pub global: bool,
    #[serde(default)]
    pub identify: Identify,
    pub limits: Limits,
    #[serde(default)]
    pub overrides: Vec<Override>,
    /// What it may do beyond data access through the Kafka listeners.
    #[serde(default)]
    pub permissions: kafka::authz::Grants,
    /// The subjects it may publish and subscribe to, and the streams it may administer.
    #[serde(default)]
    pub nats_permissions: nats::authz::Grants,
    /// Limits for each of its clients.
    #[serde(default)]
    pub clients: Option<Clients>,
}

/// A broker the gateway fronts (Kafka): the address the broker advertises, and the gateway
/// address clients should use for it instead.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BrokerRoute {
    pub upstream: String,
    pub advertise: String,
}

/// A NATS gateway listener as its clients' INFOs name it (see crate::nats::info): the Envoy
/// filter chain that serves it, its address, and every gateway address a client may reconnect
/// to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NatsListener {
    pub chain: String,
    pub host: String,
    pub port: u16,
    #[serde(default)]
    pub connect_urls: Vec<String>,
}

/// A filter configuration as the control plane sends it. Fields not named here are ignored:
/// `rebuild` only makes a configuration sent again differ from the last (compile.FilterConfig).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    version: String,
    protocol: Protocol,
    default_tenant: String,
    /// Each tenant as it was sent: one unchanged since the last configuration is not parsed
    /// again (see [`Tenants`]).
    #[serde(borrow)]
    tenants: Vec<&'a RawValue>,
    #[serde(default)]
    broker_routes: Vec<BrokerRoute>,
    #[serde(default)]
    nats_listeners: Vec<NatsListener>,
    #[serde(default)]
    kafka_clusters: Vec<kafka::Cluster>,
    #[serde(default)]
    quota: Option<QuotaService>,
    #[serde(default)]
    reports: Option<Reports>,
    #[serde(default)]
    backlog: BacklogPolicy,
    #[serde(default)]
    feed: bool,
}

/// How many configurations this process has built (see Config::built).
static BUILT: AtomicU64 = AtomicU64::new(0);

/// A parsed configuration with its attribution tables built.
#[derive(Debug)]
pub struct Config {
    pub version: String,
    /// The leading number of the version ("7-abc…" → 7), for the gauge. Control plane replicas
    /// number alike what they saw the gateways run, but two versions of one number can differ.
    pub generation: u64,
    /// This configuration's place among those built in this process (1, 2, …): what a
    /// connection's cached permission decisions hold for (the generation can repeat).
    pub built: u64,
    pub protocol: Protocol,
    pub tenants: Vec<Rc<Tenant>>,
    default_tenant: TenantId,
    directory: Directory,
    plans: Vec<Rc<TenantPlan>>,
    /// The tenants parsed for this configuration (the rest were the last one's, unchanged).
    pub parsed: Vec<TenantId>,
    /// Each tenant's JSON key and the tenant as sent (a global one before its split), for a
    /// delta to build on (see delta.rs).
    sources: Vec<(TenantKey, Rc<Tenant>)>,
    /// (upstream host, port) → (gateway host, port).
    broker_routes: Vec<((String, i32), (String, i32))>,
    /// Filter chain name → the NATS listener it serves.
    nats_listeners: Vec<(String, Rc<nats::Listener>)>,
    /// The Kafka clusters the gateway discovers, each known by its listeners' filter chain.
    kafka_clusters: Vec<Rc<kafka::Cluster>>,
    /// Where global limits are shared among replicas; None when no tenant is global.
    pub quota: Option<QuotaService>,
    /// Where usage and sampled decisions are reported; None: nowhere.
    pub reports: Option<Reports>,
    /// How much the gateway may owe one client of its own answers, and how long a client past
    /// that may take nothing before it is closed (crate::backlog).
    pub backlog: BacklogPolicy,
    /// Whether the control plane feeds tenant changes (see delta.rs): polled through the
    /// reports cluster.
    pub feed: bool,
    /// The live replica count as the control plane last told it (the quota's, if any).
    pub replicas: u64,
}

/// What the data path needs of a tenant, computed once per configuration.
#[derive(Debug)]
pub struct TenantPlan {
    pub rate: RateLimit,
    /// The read side's bucket (limits.consume).
    pub consume: Option<ConsumeLimit>,
    /// The read side's bucket of NATS deliveries (consume.messagesPerSecond; NATS plans only).
    pub consume_messages: Option<ConsumeLimit>,
    pub overrides: Vec<OverridePlan>,
    /// Its clients' buckets, if it limits its clients.
    pub clients: Option<ClientsPlan>,
    /// (pattern, override index), most specific first.
    order: Vec<(String, usize)>,
}

/// An override's narrower limits; `None` does not narrow.
#[derive(Debug)]
pub struct OverridePlan {
    pub rate: RateLimit,
    pub consume: Option<ConsumeLimit>,
    pub consume_messages: Option<ConsumeLimit>,
    pub max_message_bytes: Option<u64>,
    pub in_flight: Option<u64>,
    /// Identifies the override's patterns and limits, to key its shared state.
    pub fingerprint: u64,
    /// Identifies the override's patterns and consume bucket, to key that bucket's state.
    pub consume_fingerprint: u64,
}

impl TenantPlan {
    fn new(protocol: Protocol, t: &Tenant) -> TenantPlan {
        let overrides = t
            .overrides
            .iter()
            .map(|o| {
                let rate = o.limits.rate();
                let mut fingerprint = rate.fingerprint();
                for p in &o.patterns {
                    for b in p.bytes().chain([0]) {
                        fingerprint = (fingerprint ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
                    }
                }
                let consume = ConsumeLimit::bytes_of(&o.limits);
                // The consume bucket's own key: a change of the override's rate keeps it.
                let consume_fingerprint = o
                    .patterns
                    .iter()
                    .flat_map(|p| p.bytes().chain([0]))
                    .fold(consume.map_or(0, |c| c.fingerprint()), |h, b| {
                        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                    });
                OverridePlan {
                    consume_fingerprint,
                    rate,
                    consume,
                    consume_messages: ConsumeLimit::messages_of(protocol, &o.limits),
                    max_message_bytes: o.limits.max_message_bytes,
                    in_flight: o.limits.in_flight,
                    fingerprint,
                }
            })
            .collect();
        let mut order: Vec<(String, usize)> = t
            .overrides
            .iter()
            .enumerate()
            .flat_map(|(i, o)| o.patterns.iter().map(move |p| (p.clone(), i)))
            .collect();
        order.sort_by_key(|(p, _)| std::cmp::Reverse(patterns::specificity(protocol, p)));
        TenantPlan {
            rate: t.limits.rate(),
            consume: ConsumeLimit::bytes_of(&t.limits),
            consume_messages: ConsumeLimit::messages_of(protocol, &t.limits),
            overrides,
            clients: t.clients.as_ref().map(|c| ClientsPlan::new(protocol, c)),
            order,
        }
    }

    /// The most specific override matching a subject (NATS) or topic (Kafka).
    pub fn override_for(&self, protocol: Protocol, name: &[u8]) -> Option<usize> {
        self.order
            .iter()
            .find(|(p, _)| patterns::matches(protocol, p, name))
            .map(|(_, i)| *i)
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum ConfigError {
    Json(String),
    UnknownDefaultTenant(String),
    BadBrokerRoute(String),
    BadKafkaCluster(String),
    NoQuotaService,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Json(e) => write!(f, "filter configuration is not valid JSON for this filter: {e}"),
            ConfigError::UnknownDefaultTenant(t) => write!(f, "default tenant {t:?} is not among the tenants"),
            ConfigError::BadBrokerRoute(r) => write!(f, "broker route {r:?} is not host:port"),
            ConfigError::BadKafkaCluster(r) => write!(f, "kafka cluster {r}"),
            ConfigError::NoQuotaService => write!(f, "a tenant has global limits but no quota service is configured"),
        }
    }
}

/// A tenant as the control plane sent it (before a global tenant's concurrency is split).
fn parse_tenant(raw: &RawValue) -> Result<Tenant, ConfigError> {
    serde_json::from_str(raw.get()).map_err(|e| ConfigError::Json(e.to_string()))
}

impl Config {
    pub fn parse(bytes: &[u8]) -> Result<Config, ConfigError> {
        Config::parse_reusing(bytes, &mut Tenants::default())
    }

    /// Parses a configuration, taking each tenant whose JSON is byte for byte the one `known`
    /// holds from there, and leaves in `known` this configuration's tenants. A policy change
    /// among 10,000 tenants then parses one tenant, not 10,000: the rest is a hash of each
    /// tenant's bytes and a lookup.
    pub fn parse_reusing(bytes: &[u8], known: &mut Tenants) -> Result<Config, ConfigError> {
        let doc: Document = serde_json::from_slice(bytes).map_err(|e| ConfigError::Json(e.to_string()))?;
        let replicas = doc.quota.as_ref().map_or(1, |q| q.replicas.max(1));
        let known = &mut known.0[doc.protocol.index()];
        let mut next = TenantsByJson::with_capacity(doc.tenants.len());
        let mut entries = Vec::with_capacity(doc.tenants.len());
        let mut parsed = Vec::new();
        for raw in &doc.tenants {
            let key = TenantKey::of(raw.get().as_bytes());
            let entry = match known.get(&key) {
                Some(p) if !p.tenant.global || p.replicas == replicas => p.clone(),
                _ => {
                    parsed.push(entries.len());
                    Parsed::new(doc.protocol, Rc::new(parse_tenant(raw)?), replicas)
                }
            };
            next.insert(key, entry.clone());
            entries.push((key, entry));
        }
        let frame = Frame::of(doc)?;
        let config = Config::assemble(frame, entries, parsed)?;
        *known = next;
        Ok(config)
    }

    /// A configuration of `frame`'s settings and these tenants (`parsed`: those parsed anew).
    fn assemble(frame: Frame, entries: Vec<(TenantKey, Parsed)>, parsed: Vec<TenantId>) -> Result<Config, ConfigError> {
        let tenants: Vec<Rc<Tenant>> = entries.iter().map(|(_, e)| e.tenant.clone()).collect();
        if tenants.iter().any(|t| t.global) && frame.quota.is_none() {
            return Err(ConfigError::NoQuotaService);
        }
        let default_tenant = tenants
            .iter()
            .position(|t| t.name == frame.default_tenant)
            .ok_or_else(|| ConfigError::UnknownDefaultTenant(frame.default_tenant.clone()))?;
        let directory = Directory::new(tenants.iter().map(|t| &t.identify));
        let generation = frame
            .version
            .split('-')
            .next()
            .and_then(|g| g.parse().ok())
            .unwrap_or(0);
        Ok(Config {
            plans: entries.iter().map(|(_, e)| e.plan.clone()).collect(),
            sources: entries.into_iter().map(|(k, e)| (k, e.source)).collect(),
            parsed,
            broker_routes: frame.broker_routes,
            nats_listeners: frame.nats_listeners,
            kafka_clusters: frame.kafka_clusters,
            version: frame.version,
            generation,
            built: BUILT.fetch_add(1, Ordering::Relaxed) + 1,
            protocol: frame.protocol,
            tenants,
            default_tenant,
            directory,
            quota: frame.quota,
            reports: frame.reports,
            backlog: frame.backlog,
            feed: frame.feed,
            replicas: frame.replicas,
        })
    }

    /// Whether a tenant's rate limits are this process's or shared among replicas.
    pub fn scope(&self, id: TenantId) -> Scope {
        match (self.tenants.get(id), &self.quota) {
            (Some(t), Some(q)) if t.global => Scope::Global {
                replicas: q.replicas.max(1),
            },
            _ => Scope::PerGateway,
        }
    }

    /// The NATS listener a filter chain serves, as INFOs name it; None if the control plane
    /// named none (the INFO then names no address at all).
    pub fn nats_listener(&self, chain: &str) -> Option<Rc<nats::Listener>> {
        self.nats_listeners
            .iter()
            .find(|(c, _)| c == chain)
            .map(|(_, l)| l.clone())
    }

    /// Whether broker addresses in responses must be rewritten.
    pub fn rewrites_brokers(&self) -> bool {
        !self.broker_routes.is_empty() || !self.kafka_clusters.is_empty()
    }

    /// The discovered Kafka cluster a filter chain's listeners front, if any.
    pub fn kafka_cluster(&self, chain: &str) -> Option<Rc<kafka::Cluster>> {
        self.kafka_clusters.iter().find(|c| c.chain == chain).cloned()
    }

    /// Whether any Kafka cluster is discovered (the glue then reads its chain name).
    pub fn discovers_kafka_clusters(&self) -> bool {
        !self.kafka_clusters.is_empty()
    }

    pub fn default_tenant(&self) -> TenantId {
        self.default_tenant
    }

    pub fn tenant(&self, id: TenantId) -> Option<&Tenant> {
        self.tenants.get(id).map(|t| &**t)
    }

    pub fn plan(&self, id: TenantId) -> Option<&TenantPlan> {
        self.plans.get(id).map(|p| &**p)
    }

    /// The tenant a connection belongs to (see crate::attribution for the precedence).
    pub fn tenant_for(&self, who: &Identity) -> TenantId {
        self.directory.tenant_for(who).unwrap_or(self.default_tenant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"version":"7-abcdef","protocol":"kafka","defaultTenant":"anonymous","tenants":[
        {"name":"acme","identify":{"natsUsers":["acme"],"kafkaClientIdPrefixes":["acme-"],"kafkaSaslPrincipals":["acme-svc"],
            "natsNkeys":["UACME"],"natsAccounts":["AACME"],"kafkaOauthClaim":"azp","tlsSubjects":["CN=acme"],"tlsSans":["acme.example.org"]},
         "limits":{"maxMessageBytes":262144}},
        {"name":"acme-eu","identify":{"kafkaClientIdPrefixes":["acme-eu-"]},"limits":{}},
        {"name":"anonymous","limits":{"maxMessageBytes":65536}}]}"#;

    fn config() -> Config {
        match Config::parse(DOC.as_bytes()) {
            Ok(c) => c,
            Err(e) => unreachable!("{e}"),
        }
    }

    #[test]
    fn reads_version_generation_and_limits() {
        let c = config();
        assert_eq!(c.generation, 7);
        assert_eq!(c.protocol, Protocol::Kafka);
        assert_eq!(c.tenants[0].limits.max_message_bytes, Some(262_144));
        assert_eq!(c.tenants[1].limits.max_message_bytes, None, "absent is unlimited");
    }

    #[test]
    fn every_identify_field_of_the_compiled_json_attributes() {
        use crate::identity::{Authenticated, KafkaPrincipal, NatsCredentials, PeerCertificate};
        let c = config();
        let nats = |user: Option<&str>, nkey: Option<&str>, account: Option<&str>| Identity {
            authenticated: Some(Authenticated::Nats(NatsCredentials {
                user: user.map(Into::into),
                nkey: nkey.map(Into::into),
                account: account.map(Into::into),
                name: None,
            })),
            ..Identity::default()
        };
        let kafka = |name: &str, claims: &[(&str, &str)]| Identity {
            authenticated: Some(Authenticated::Kafka(KafkaPrincipal {
                name: name.into(),
                claims: claims.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
            })),
            ..Identity::default()
        };
        let cert = |subject: &str, san: &str| Identity {
            certificate: Some(PeerCertificate {
                subject: subject.into(),
                sans: vec![san.into()],
            }),
            ..Identity::default()
        };
        let claimed = Identity {
            client_id: Some("acme-eu-billing".into()),
            ..Identity::default()
        };
        let cases = [
            ("natsUsers", nats(Some("acme"), None, None), 0),
            ("natsNkeys", nats(None, Some("UACME"), None), 0),
            ("natsAccounts", nats(None, Some("Uother"), Some("AACME")), 0),
            ("kafkaSaslPrincipals", kafka("acme-svc", &[]), 0),
            ("kafkaOauthClaim", kafka("x", &[("sub", "x"), ("azp", "acme-svc")]), 0),
            ("tlsSubjects", cert("CN=acme", "-"), 0),
            ("tlsSans", cert("CN=x", "acme.example.org"), 0),
            ("kafkaClientIdPrefixes", claimed, 1),
            ("nothing", Identity::default(), 2),
        ];
        for (field, who, want) in cases {
            assert_eq!(c.tenant_for(&who), want, "{field}");
        }
    }

    #[test]
    fn broker_routes_map_advertised_addresses_to_the_gateway() {
        use crate::kafka::BrokerMap;
        let doc = r#"{"version":"1-a","protocol":"kafka","defaultTenant":"t","tenants":[{"name":"t","limits":{}}],
            "brokerRoutes":[{"upstream":"kafka-1:9092","advertise":"gw.example.com:9093"}]}"#;
        let c = Config::parse(doc.as_bytes()).unwrap();
        assert!(c.rewrites_brokers());
        use crate::kafka::Route;
        assert_eq!(c.route(1, b"kafka-1", 9092), Route::To("gw.example.com", 9093));
        assert_eq!(c.route(2, b"kafka-2", 9092), Route::Keep);
        let bad = doc.replace("kafka-1:9092", "kafka-1");
        assert!(matches!(
            Config::parse(bad.as_bytes()),
            Err(ConfigError::BadBrokerRoute(_))
        ));
    }

    #[test]
    fn nats_listeners_are_found_by_their_filter_chain() {
        let doc = r#"{"version":"1-a","protocol":"nats","defaultTenant":"t","tenants":[{"name":"t","limits":{}}],
            "natsListeners":[{"chain":"weighstation-nats","host":"gw.example","port":4222,
                              "connectUrls":["gw-0.example:4222","gw-1.example:4222"]},
                             {"chain":"weighstation-nats_tls","host":"gw.example","port":4322}]}"#;
        let c = Config::parse(doc.as_bytes()).unwrap();
        let plain = c.nats_listener("weighstation-nats").unwrap();
        assert_eq!(plain.address, Some(("gw.example".into(), 4222)));
        assert_eq!(plain.connect_urls, ["gw-0.example:4222", "gw-1.example:4222"]);
        let tls = c.nats_listener("weighstation-nats_tls").unwrap();
        assert_eq!(tls.address, Some(("gw.example".into(), 4322)));
        assert!(tls.connect_urls.is_empty());
        assert!(c.nats_listener("weighstation-kafka").is_none());
    }

    #[test]
    fn the_most_specific_override_wins() {
        let doc = r#"{"version":"1-a","protocol":"nats","defaultTenant":"t","tenants":[{"name":"t","limits":{},
            "overrides":[{"patterns":["orders.>"],"limits":{"maxMessageBytes":100}},
                         {"patterns":["orders.eu.*","audit"],"limits":{"maxMessageBytes":50}}]}]}"#;
        let c = Config::parse(doc.as_bytes()).unwrap();
        let plan = c.plan(0).unwrap();
        assert_eq!(plan.override_for(Protocol::Nats, b"orders.eu.new"), Some(1));
        assert_eq!(plan.override_for(Protocol::Nats, b"orders.us.new"), Some(0));
        assert_eq!(plan.override_for(Protocol::Nats, b"audit"), Some(1));
        assert_eq!(plan.override_for(Protocol::Nats, b"billing"), None);
        assert_ne!(plan.overrides[0].fingerprint, plan.overrides[1].fingerprint);
    }

    #[test]
    fn a_global_tenant_is_shared_and_its_concurrency_split_among_replicas() {
        let doc = r#"{"version":"1","protocol":"nats","defaultTenant":"a","tenants":[
            {"name":"a","limits":{"inFlight":10,"connections":5,"queueMaxMessages":7}},
            {"name":"g","global":true,"limits":{"messagesPerSecond":900,"inFlight":10,"connections":5,"queueMaxMessages":7},
             "overrides":[{"patterns":["x"],"limits":{"inFlight":4}}]}],
            "quota":{"cluster":"weighstation_quota","authority":"q:8081","replicas":3,"timeoutMs":500}}"#;
        let c = Config::parse(doc.as_bytes()).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(c.scope(0), Scope::PerGateway);
        assert_eq!(c.scope(1), Scope::Global { replicas: 3 });
        let (a, g) = (&c.tenants[0].limits, &c.tenants[1].limits);
        assert_eq!(
            (a.in_flight, a.connections, a.queue_max_messages),
            (Some(10), Some(5), Some(7))
        );
        assert_eq!(
            (g.in_flight, g.connections, g.queue_max_messages),
            (Some(4), Some(2), Some(7))
        );
        assert_eq!(c.tenants[1].overrides[0].limits.in_flight, Some(2));
        let without = doc.replace(
            r#"{"cluster":"weighstation_quota","authority":"q:8081","replicas":3,"timeoutMs":500}"#,
            "null",
        );
        assert_eq!(
            Config::parse(without.as_bytes()).err(),
            Some(ConfigError::NoQuotaService)
        );
    }

    #[test]
    fn rejects_unknown_default_tenant_and_bad_json() {
        let bad = DOC.replace("\"defaultTenant\":\"anonymous\"", "\"defaultTenant\":\"nobody\"");
        assert_eq!(
            Config::parse(bad.as_bytes()).err(),
            Some(ConfigError::UnknownDefaultTenant("nobody".into()))
        );
        assert!(matches!(Config::parse(b"{"), Err(ConfigError::Json(_))));
    }
}

/// Brokers listed by address (`--kafka-broker`): an address no route names is kept, since it
/// may be the gateway's own.
impl crate::kafka::BrokerMap for Config {
    fn route(&self, _node: i32, host: &[u8], port: i32) -> crate::kafka::Route<'_> {
        self.broker_routes
            .iter()
            .find(|((h, p), _)| h.as_bytes() == host && *p == port)
            .map_or(crate::kafka::Route::Keep, |(_, (h, p))| {
                crate::kafka::Route::To(h.as_str(), *p)
            })
    }
}
