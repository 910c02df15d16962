//! The two protocols the gateway speaks.

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Nats,
    Kafka,
}

impl Protocol {
    /// Both, in the order of [`Protocol::index`].
    pub const ALL: [Protocol; 2] = [Protocol::Nats, Protocol::Kafka];

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Nats => "nats",
            Protocol::Kafka => "kafka",
        }
    }

    /// Its place in a per-protocol array.
    pub fn index(self) -> usize {
        match self {
            Protocol::Nats => 0,
            Protocol::Kafka => 1,
        }
    }
}
