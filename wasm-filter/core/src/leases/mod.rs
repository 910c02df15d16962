//! Worker leases: the first level of the lease hierarchy (docs/architecture.md). A tenant's
//! limiter state is shared by every worker of an Envoy process and updated by compare-and-swap;
//! a worker takes rate tokens and in-flight slots from it in blocks and spends them with plain
//! arithmetic, so one shared-data operation serves many messages.
//!
//! Limits stay exact: the tokens workers hold count against the shared bucket's depth
//! ([`SharedRate`]), so tokens in the bucket plus tokens in workers' hands never exceed the
//! burst, and a lease nobody gives back lapses after at most two epochs.

mod rate;
mod slots;

pub use rate::{Grant, RateLease, Refusal, Scope, SharedRate, Usage, EPOCH_NS, PPM, SHARED_RATE_WORDS};
pub use slots::SlotLease;

#[cfg(test)]
mod tests;
