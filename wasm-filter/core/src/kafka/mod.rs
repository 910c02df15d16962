//! Kafka wire protocol, client → broker direction: request framing, request headers and the
//! parts of Produce requests the limits need (record batch sizes and counts, from the
//! uncompressed RecordBatch v2 header — nothing is decompressed).

mod cursor;
mod produce;
mod stream;

pub use produce::{
    visit_produce, PartitionBatch, ProduceError, ProduceSummary, MAX_PRODUCE_VERSION, MIN_PRODUCE_VERSION,
};
pub use stream::{sasl_plain_user, RequestHandler, RequestHeader, RequestStream, StreamOutcome, API_SASL_AUTHENTICATE, MAX_HEADER_BYTES};

/// API keys the filter reads.
pub const API_PRODUCE: i16 = 0;
pub const API_VERSIONS: i16 = 18;
