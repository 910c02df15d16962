//! weighstation's filter core. Nothing here depends on proxy-wasm: the policy model, tenant
//! attribution, the NATS and Kafka protocol scanners and the bookkeeping of held connections
//! are plain Rust, tested natively. The Envoy glue (`weighstation-filter`) feeds them bytes and
//! turns their verdicts into host calls.

pub mod attribution;
pub mod backlog;
pub mod carry;
pub mod clients;
pub mod config;
pub mod consume;
pub mod decisions;
mod edit;
pub mod identity;
pub mod impact;
pub mod jwt;
pub mod kafka;
pub mod leases;
pub mod limits;
pub mod metrics;
pub mod nats;
pub mod patterns;
pub mod protocol;
pub mod quota;
pub mod report;
pub mod scan;
pub mod source;
pub mod waitlist;
