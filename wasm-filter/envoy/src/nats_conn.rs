//! One NATS client connection: feeds client bytes to the core scanner, attributes the
//! connection from CONNECT and applies the tenant's limits to each PUB/HPUB.

use proxy_wasm::traits::{Context, StreamContext};
use proxy_wasm::types::{Action, PeerType};
use weighstation_core::config::Protocol;
use weighstation_core::nats::{connect_user, Admission, ClientHandler, ClientStream, Outcome, Publish};

use crate::tenancy::{Attribution, Identity};

/// nats-server's text for a PUB over max_payload; its clients recognise it.
const MAX_PAYLOAD_VIOLATION: &str = "Maximum Payload Violation";

/// Sent to nats-server in place of an oversized message: a PUB whose declared size exceeds any
/// server's max_payload (64 MiB at most) makes nats-server itself answer
/// `-ERR 'Maximum Payload Violation'` and close the connection — the client sees exactly what it
/// would have seen without the gateway, and none of the payload is forwarded.
const SERVER_REFUSES_PAYLOAD: &[u8] = b"PUB _WEIGHSTATION.MAX_PAYLOAD 999999999\r\n";

pub struct NatsConn {
    stream: ClientStream,
    who: Attribution,
    /// Set once the connection is being closed: nothing more from the client is forwarded.
    closing: bool,
}

impl Default for NatsConn {
    fn default() -> Self {
        NatsConn {
            stream: ClientStream::default(),
            who: Attribution::new(Protocol::Nats),
            closing: false,
        }
    }
}

struct Decide<'a> {
    who: &'a mut Attribution,
}

impl ClientHandler for Decide<'_> {
    fn connect(&mut self, json: &[u8]) {
        self.who.identify(Identity::Nats {
            user: connect_user(json),
        });
    }

    fn publish(&mut self, p: &Publish<'_>) -> Admission {
        self.who.ensure_attributed();
        let Some(tenant) = self.who.tenant() else {
            return Admission::Forward;
        };
        if let Some(max) = tenant.limits.max_message_bytes {
            if p.total_bytes as u64 > max && !tenant.dry_run {
                log::info!(
                    "weighstation: nats tenant {} sent {} bytes to {}, over maxMessageBytes {max}: closing",
                    tenant.name,
                    p.total_bytes,
                    String::from_utf8_lossy(p.subject)
                );
                return Admission::Close(MAX_PAYLOAD_VIOLATION);
            }
        }
        self.who.metrics().accepted(1, p.total_bytes as u64);
        Admission::Forward
    }
}

impl Context for NatsConn {}

impl StreamContext for NatsConn {
    fn on_downstream_data(&mut self, size: usize, _end_of_stream: bool) -> Action {
        if self.closing {
            self.set_downstream_data(0, size, &[]);
            return Action::Continue;
        }
        if size == 0 {
            return Action::Continue;
        }
        let Some(buf) = self.get_downstream_data(0, size) else {
            return Action::Continue;
        };
        self.who.refresh();
        match self.stream.process(&buf, &mut Decide { who: &mut self.who }) {
            Outcome::Forward => Action::Continue,
            Outcome::Hold => Action::Pause,
            Outcome::Close { at, error } => {
                self.closing = true;
                let mut out = buf.get(..at).unwrap_or_default().to_vec();
                if error == MAX_PAYLOAD_VIOLATION {
                    out.extend_from_slice(SERVER_REFUSES_PAYLOAD);
                } else {
                    // A protocol error: let nats-server see it and answer in its own words.
                    out.extend_from_slice(buf.get(at..).unwrap_or_default());
                }
                self.set_downstream_data(0, size, &out);
                Action::Continue
            }
        }
    }

    fn on_downstream_close(&mut self, _peer: PeerType) {
        self.who.closed();
    }
}
