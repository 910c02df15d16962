//! The NATS INFO rewriter: every INFO a client is sent names the gateway, never a server.
//!
//! nats-server's INFO tells a client where the cluster's servers are (`connect_urls`,
//! `ws_connect_urls`) and where the one it reached listens (`host`, `port`, `ip`). nats.go adds
//! `connect_urls` to its reconnect pool, so a client that learnt them reconnects around the
//! gateway when it restarts: past every limit, or (a `proxy_required` user) into an
//! authorization error that closes it for good. So every INFO is rewritten, the first and
//! every asynchronous one:
//!
//! - `connect_urls` become the gateway's advertised addresses for the listener the client used,
//!   or are removed when none are configured; `ws_connect_urls` are removed (the gateway has
//!   no WebSocket listener);
//! - `host` and `port` become that listener's address; `ip` is removed; `client_ip` becomes
//!   the client's own address as the gateway sees it (the server saw the gateway's);
//! - `max_payload` is lowered to the tenant's limit, and TLS is said as the client's own
//!   connection is;
//! - every other field (`ldm`, `nonce`, `server_id`, …) is kept.
//!
//! It fails closed: an INFO that is not a JSON object is never forwarded as it was
//! ([`Unreadable`]); the session ends the connection and says why.

use serde_json::{Map, Value};

/// The gateway as the clients of one listener should see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listener {
    /// The listener's address (`host`, `port`); None: not known, and both are removed.
    pub address: Option<(String, u16)>,
    /// `connect_urls`: every gateway address a client may reconnect to (`host:port`); empty:
    /// the field is removed.
    pub connect_urls: Vec<String>,
}

/// What this client's INFOs must say besides the gateway's addresses.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientView<'a> {
    pub listener: Option<&'a Listener>,
    /// The tenant's maxMessageBytes, to advertise when lower than the server's.
    pub max_payload: Option<u64>,
    /// The client reached the gateway over TLS.
    pub tls: bool,
    /// The client's address as the gateway sees it.
    pub client_ip: Option<&'a str>,
}

/// Why an INFO could not be rewritten: the connection ends rather than forward it as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// Not a JSON object.
    NotAnObject,
    /// Its control line is longer than the scanner reads (super::MAX_SERVER_LINE).
    TooLong,
}

impl Unreadable {
    /// The reason logged when the connection is ended for it.
    pub fn reason(self) -> &'static str {
        match self {
            Unreadable::NotAnObject => "the server's INFO is not a JSON object: it is never forwarded unchecked",
            Unreadable::TooLong => "the server's INFO is longer than 64 KiB: it is never forwarded unchecked",
        }
    }
}

/// Fields that say where a server is; each is replaced or removed.
const SERVER_ADDRESS_FIELDS: [&str; 6] = ["connect_urls", "ws_connect_urls", "host", "port", "ip", "client_ip"];

/// `INFO {...}\r\n` for the client, from the server's INFO JSON.
pub fn rewrite(json: &[u8], view: &ClientView<'_>) -> Result<Vec<u8>, Unreadable> {
    let mut info: Map<String, Value> = serde_json::from_slice(json).map_err(|_| Unreadable::NotAnObject)?;
    for field in SERVER_ADDRESS_FIELDS {
        info.remove(field);
    }
    if let Some(listener) = view.listener {
        if let Some((host, port)) = &listener.address {
            info.insert("host".into(), host.as_str().into());
            info.insert("port".into(), (*port).into());
        }
        if !listener.connect_urls.is_empty() {
            info.insert("connect_urls".into(), listener.connect_urls.clone().into());
        }
    }
    if let Some(ip) = view.client_ip {
        info.insert("client_ip".into(), ip.into());
    }
    if let Some(max) = view.max_payload {
        let server_max = info.get("max_payload").and_then(Value::as_u64).unwrap_or(u64::MAX);
        info.insert("max_payload".into(), server_max.min(max).into());
    }
    info.insert("tls_required".into(), view.tls.into());
    if !view.tls {
        info.remove("tls_available");
    }
    let mut line = b"INFO ".to_vec();
    serde_json::to_writer(&mut line, &info).map_err(|_| Unreadable::NotAnObject)?;
    line.extend_from_slice(b"\r\n");
    Ok(line)
}

#[cfg(test)]
#[path = "info_tests.rs"]
mod tests;
