//! JetStream's pull requests, as the client stream (which reads a pull's body whole) and the
//! deliveries that answer them both know them.

/// The subject prefix of JetStream's pull requests.
pub const PULL_PREFIX: &[u8] = b"$JS.API.CONSUMER.MSG.NEXT.";

/// Whether a publish to `subject` is a pull request (`$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`).
pub fn is_pull(subject: &[u8]) -> bool {
    subject.starts_with(PULL_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_is_a_publish_to_the_next_message_api() {
        assert!(is_pull(b"$JS.API.CONSUMER.MSG.NEXT.ORDERS.worker"));
        assert!(!is_pull(b"$JS.API.CONSUMER.INFO.ORDERS.worker"));
    }
}
