//! What a scanner tells the glue about one buffer Envoy presented, shared by the protocols.

/// What the glue does with the buffer it passed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Keep the buffer and present it again with the next bytes.
    pub hold: bool,
    /// Replace the buffer with this before forwarding or holding it.
    pub replace: Option<Vec<u8>>,
    /// When holding: how many bytes at the start of the (replaced) buffer are decided and may be
    /// forwarded now; the held message starts there.
    pub decided: usize,
}

/// What the filter decides for one message (a NATS operation, a Kafka request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    Forward,
    /// Not now: hold this message (and everything after it) until the next attempt.
    Hold,
    /// Drop the message and send these bytes to the server in its place.
    Replace(Vec<u8>),
    /// Send these bytes in place of the operation, then nothing more from this client.
    Close(Vec<u8>),
}
