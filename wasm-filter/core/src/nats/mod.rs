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

/// The user named in a CONNECT's JSON, if any. Only `user` is read; nats-server has already
/// authenticated it by the time any PUB is forwarded.
pub fn connect_user(json: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Connect {
        user: Option<String>,
    }
    serde_json::from_slice::<Connect>(json).ok().and_then(|c| c.user)
}
