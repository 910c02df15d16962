//! Kafka wire protocol, client → broker direction: request framing, request headers and the
//! parts of Produce requests the limits need (record batch sizes and counts, from the
//! uncompressed RecordBatch v2 header — nothing is decompressed).

pub mod authz;
mod brokers;
mod cursor;
mod encode;
mod fetch;
#[cfg(test)]
pub(crate) mod fetch_tests;
mod gaps;
#[cfg(test)]
mod order_tests;
mod produce;
mod quotas;
mod response;
mod retries;
mod rewrite;
mod sasl;
mod stream;

pub use brokers::{BrokerMap, Cluster, Route, MAX_NODES};
pub use encode::{
    api_versions_request, produce_response, request_frame, PartitionError, MESSAGE_TOO_LARGE, THROTTLING_QUOTA_EXCEEDED,
};
pub use fetch::{fetch_topics, API_FETCH, MAX_FETCH_VERSION, MIN_FETCH_VERSION};
pub use gaps::Gaps;
pub use produce::{
    visit_produce, PartitionBatch, ProduceError, ProduceSummary, MAX_PRODUCE_VERSION, MIN_PRODUCE_VERSION,
};
pub use quotas::{
    describe_client_quotas, quota_filter, Caller, GatewayQuotas, QuotaFilter, API_DESCRIBE_CLIENT_QUOTAS,
};
pub use response::{cap_versions, raise_produce_throttle, Interest, ResponseHandler, ResponseStream, MAX_WHOLE};
pub use retries::{Batch, Claim, Retries, HORIZON_NS};
pub use rewrite::{
    rewrite_brokers, rewrite_produce_endpoints, API_DESCRIBE_CLUSTER, API_FIND_COORDINATOR, API_METADATA,
    COORDINATOR_NOT_AVAILABLE,
};
pub use sasl::{
    authenticate_answer, authenticate_step, handshake_mechanism, Answer, Mechanism, Step, API_SASL_AUTHENTICATE,
    API_SASL_HANDSHAKE,
};
pub use stream::{RequestHandler, RequestHeader, RequestStream, MAX_HEADER_BYTES};

/// API keys the filter reads.
pub const API_PRODUCE: i16 = 0;
pub const API_VERSIONS: i16 = 18;
/// Produce requests and responses are flexible (compact encodings, tagged fields) from v9.
pub const FIRST_FLEXIBLE_PRODUCE: i16 = 9;
