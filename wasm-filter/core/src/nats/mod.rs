//! NATS client protocol, client → server direction: control-line parsing and a stream scanner
//! that walks a connection's bytes message by message.

mod line;
mod server;
mod session;
mod stream;

pub use line::{parse_client_line, ClientOp, Parsed, ProtocolError, MAX_CONTROL_LINE};
pub use server::{ServerEdit, ServerHandler, ServerOp, ServerStream, MAX_SERVER_LINE};
pub use session::{Gate, Session, Verdict, SERVER_REFUSES_PAYLOAD};
pub use stream::{ClientHandler, ClientStream, Publish};

/// What the filter reads of a CONNECT's JSON (once per connection): the `user`, which
/// nats-server has authenticated by the time any PUB is forwarded, and whether the client
/// speaks headers (may send HPUB). Unreadable JSON reads as neither; nats-server judges it.
#[derive(Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Connect {
    pub user: Option<String>,
    #[serde(default)]
    pub headers: bool,
}

pub fn parse_connect(json: &[u8]) -> Connect {
    serde_json::from_slice(json).unwrap_or_default()
}
