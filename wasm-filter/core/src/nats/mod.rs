//! NATS client protocol, client → server direction: control-line parsing and a stream scanner
//! that walks a connection's bytes message by message.

pub mod authz;
mod deliveries;
mod info;
mod line;
mod proxy;
mod pulls;
mod reading;
mod server;
mod session;
mod stream;

pub use deliveries::{pull_within, Deliveries, Delivery, Tally};
pub use info::{ClientView, Listener, Unreadable};
pub use line::{parse_client_line, ClientOp, Parsed, ProtocolError, MAX_CONTROL_LINE};
pub use proxy::ProxyKey;
pub use pulls::{is_pull, PULL_PREFIX};
pub use server::{Delivered, ServerEdit, ServerHandler, ServerOp, ServerStream, MAX_SERVER_LINE};
pub use session::{Gate, Session, Verdict, SERVER_REFUSES_PAYLOAD, TLS_FIRST_CONNECT, TLS_FIRST_REQUIRED};
pub use stream::{ClientHandler, ClientStream, Publish};

use crate::identity::NatsCredentials;

/// What the filter reads of a CONNECT's JSON (once per connection): the credentials it
/// presents, which count only once nats-server accepted them (see crate::identity), and whether
/// the client speaks headers (may send HPUB). Unreadable JSON reads as nothing; nats-server
/// judges it.
#[derive(Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Connect {
    pub user: Option<String>,
    pub nkey: Option<String>,
    pub jwt: Option<String>,
    /// The connection's name: it names the client for client limits (crate::clients).
    pub name: Option<String>,
    #[serde(default)]
    pub headers: bool,
}

pub fn parse_connect(json: &[u8]) -> Connect {
    serde_json::from_slice(json).unwrap_or_default()
}

impl Connect {
    pub fn credentials(self) -> NatsCredentials {
        NatsCredentials {
            name: self.name,
            ..NatsCredentials::new(self.user, self.nkey, self.jwt.as_deref())
        }
    }
}
