//! Any bytes, in any split, in either direction, with any decisions: the NATS session never
//! panics, never decides more of a held buffer than there is, and never forwards more than it
//! was given plus what it inserts (the PING and proxy_sig after the first CONNECT, a refusal's or
//! close's replacement, the -ERR in place of a PONG, an INFO with the tenant's limit or the
//! client's TLS flags); while it inserts nothing (and swallows no verdict PONG), it forwards what
//! it was given, in order. The client's buffer is handled as the glue does: forwarded whole, or
//! up to the held message, whose
//! bytes are presented again with the next read, or at once when the server's verdict on the
//! CONNECT releases them. Between server reads a policy reload may change the tenant's limit
//! (an INFO with the new one follows). The input's length picks the client's transport:
//! plaintext, TLS (INFOs are rewritten to say so), or plaintext on a TLS-first listener (the
//! CONNECT is refused with an error).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::cell::Cell;
use weighstation_core::identity::NatsCredentials;
use weighstation_core::nats::{
    Gate, Publish, Session, Verdict, SERVER_REFUSES_PAYLOAD, TLS_FIRST_CONNECT, TLS_FIRST_REQUIRED,
};
use weighstation_core::source::Ranges;

/// No refusal or close adds more than this to the client's stream beyond the bytes it replaces:
/// a close's oversized PUB; a refused message's no-responders PUB or HPUB and PING add less (the
/// reply subject or subject they repeat was in the message they replace).
const CLIENT_INSERT: usize = SERVER_REFUSES_PAYLOAD.len();

/// The proxy signature the gate hands out.
const SIGNATURE: &str = "c2lnbmF0dXJl";

/// The first CONNECT gains the verdict PING and, when the server sent a nonce, proxy_sig.
const CONNECT_INSERT: usize = b"\r\nPING\r\n".len() + b",\"proxy_sig\":\"\"".len() + SIGNATURE.len();

/// What the -ERR line owed for a refusal adds to the server's stream: it replaces the PONG that
/// answers the refusal's PING.
fn err_line_growth(text: &str) -> usize {
    b"-ERR ''\r\n".len() + text.len() - b"PONG\n".len()
}

/// An INFO line the session writes re-encodes the server's last INFO (at most all the server
/// sent): a JSON number may grow (`1e15,` is written out as `1000000000000000.0,`, under 4
/// times as long), strings and whitespace do not, and max_payload (1024 or 2048) and
/// tls_required may be added.
fn info_line_bound(server_sent: usize) -> usize {
    5 * server_sent + b"INFO ,\"max_payload\":1024,\"tls_required\":false\r\n".len()
}

/// Decisions drawn from the input, so the fuzzer explores holds, refusals and closes too; it
/// counts what the session may insert because of them.
struct DrawnGate<'a> {
    choices: &'a [u8],
    next: usize,
    /// The tenant's limit to advertise in INFO, if any.
    advertise: Option<u64>,
    /// Refusals and closes: each replaces client bytes with at most CLIENT_INSERT more.
    client_inserts: usize,
    /// What the -ERR lines owed to the client for refusals add to the server's stream.
    errors_owed: usize,
    /// Limits handed out to advertise: each may become one INFO line.
    infos: Cell<usize>,
}

impl DrawnGate<'_> {
    fn draw(&mut self) -> u8 {
        let c = self
            .choices
            .get(self.next % self.choices.len().max(1))
            .copied()
            .unwrap_or(0);
        self.next += 1;
        c
    }

    fn refuse(&mut self, text: &str) -> String {
        self.client_inserts += 1;
        self.errors_owed += err_line_growth(text);
        text.into()
    }
}

impl Gate for DrawnGate<'_> {
    fn authenticated(&mut self, _credentials: NatsCredentials) -> Result<(), String> {
        if self.draw().is_multiple_of(7) {
            // Replaces the verdict PONG or +OK.
            let text = "maximum connections exceeded";
            self.errors_owed += err_line_growth(text);
            Err(text.into())
        } else {
            Ok(())
        }
    }
    fn authentication_failed(&mut self) {}
    fn proxy_signature(&self, _nonce: &str) -> Option<String> {
        Some(SIGNATURE.into())
    }
    fn publish(&mut self, _p: &Publish<'_>) -> Verdict {
        match self.draw() % 5 {
            0 => Verdict::Hold,
            1 => Verdict::Refuse(self.refuse("refused")),
            2 => {
                self.client_inserts += 1;
                Verdict::Close
            }
            _ => Verdict::Forward,
        }
    }
    /// A subscription is refused or passed on, as the data draws.
    fn subscribe(&mut self, _subject: &[u8]) -> Verdict {
        match self.draw() % 3 {
            0 => Verdict::Refuse(self.refuse("Permissions Violation for Subscription")),
            _ => Verdict::Forward,
        }
    }
    fn delivered(&mut self, _: &weighstation_core::nats::Delivered<'_>) -> bool {
        true
    }
    /// Each call may put an INFO before the client: with the tenant's limit, or, without one,
    /// with the server's TLS flags made the client's own (a plaintext client behind a gateway
    /// that speaks TLS to nats-server: `tls_required` true becomes false).
    fn max_payload(&self) -> Option<u64> {
        self.infos.set(self.infos.get() + 1);
        self.advertise
    }
}

/// What one direction was given and what it forwarded.
#[derive(Default)]
struct Direction {
    given: Vec<u8>,
    forwarded: Vec<u8>,
}

/// The client's direction as the glue drives it.
#[derive(Default)]
struct Client {
    dir: Direction,
    /// Bytes held back, presented again with the next read (or at once on a release).
    held: Vec<u8>,
    /// The client sent a CONNECT (the first gains the verdict PING and proxy_sig).
    connect_seen: bool,
    tls_first_required: bool,
}

impl Client {
    /// One client read (empty: the held bytes decided again, as after a release).
    fn read(&mut self, chunk: &[u8], session: &mut Session, gate: &mut DrawnGate<'_>) {
        let Client { dir, held, .. } = self;
        dir.given.extend_from_slice(chunk);
        held.extend_from_slice(chunk);
        let o = session.client_data(&mut Ranges::new(held), gate);
        if let Some(r) = o.replace {
            *held = r;
        }
        if o.hold {
            assert!(o.decided <= held.len(), "decided {} of {}", o.decided, held.len());
            dir.forwarded.extend(held.drain(..o.decided));
            session.forwarded(o.decided);
        } else {
            dir.forwarded.append(held);
        }
        let (given, forwarded) = (dir.given.len(), dir.forwarded.len());
        let first_connect = !self.connect_seen && dir.given.to_ascii_uppercase().windows(7).any(|w| w == b"CONNECT");
        self.connect_seen = self.connect_seen || first_connect;
        if first_connect && self.tls_first_required {
            // Its PING's PONG becomes the error that tells the client to handshake first.
            gate.errors_owed += err_line_growth(TLS_FIRST_REQUIRED);
        }
        // On a TLS-first listener a plaintext client's CONNECT, however short, is replaced by the
        // filter's own.
        let connect_insert = CONNECT_INSERT + usize::from(self.tls_first_required) * TLS_FIRST_CONNECT.len();
        let bound = given + gate.client_inserts * CLIENT_INSERT + usize::from(self.connect_seen) * connect_insert;
        assert!(
            forwarded <= bound,
            "client: forwarded {forwarded} of {given}, bound {bound}"
        );
        if gate.client_inserts == 0 && !self.connect_seen {
            assert!(dir.given.starts_with(&dir.forwarded), "client bytes changed");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (choices, stream) = rest.split_at(rest.len().min(8));
    let (client_tls, tls_first_required) = (data.len() % 3 == 1, data.len() % 3 == 2);
    let mut gate = DrawnGate {
        choices,
        next: 0,
        // A split of 128 or more also means the tenant has no limit to advertise: no INFO is
        // written, so the server's bytes are held to the tight bound.
        advertise: (split < 128).then_some(1024),
        client_inserts: 0,
        errors_owed: 0,
        infos: Cell::new(0),
    };
    let mut session = Session::default();
    session.client_tls(client_tls);
    if tls_first_required {
        session.require_tls_first();
    }
    let mut client = Client {
        tls_first_required,
        ..Client::default()
    };
    let mut server = Direction::default();
    for (i, chunk) in stream.chunks(usize::from(split).max(1)).enumerate() {
        if i % 2 == 0 {
            client.read(chunk, &mut session, &mut gate);
            continue;
        }
        // A policy reload may change the tenant's limit between reads (1024 <-> 2048 bytes):
        // an INFO with the new one follows at the next safe point.
        if gate.draw().is_multiple_of(4) {
            gate.advertise = gate.advertise.map(|limit| 3072 - limit);
            session.limit_changed(&gate);
        }
        server.given.extend_from_slice(chunk);
        match session.server_data(&mut Ranges::new(chunk), &mut gate) {
            Some(r) => server.forwarded.extend(r),
            None => server.forwarded.extend_from_slice(chunk),
        }
        let (given, forwarded) = (server.given.len(), server.forwarded.len());
        let bound = given + gate.errors_owed + gate.infos.get() * info_line_bound(given);
        assert!(
            forwarded <= bound,
            "server: forwarded {forwarded} of {given}, bound {bound}"
        );
        // The PONG that answers the verdict PING the first CONNECT gained is not forwarded.
        if gate.errors_owed == 0 && gate.infos.get() == 0 && !client.connect_seen {
            assert!(server.given.starts_with(&server.forwarded), "server bytes changed");
        }
        // The server's verdict on the CONNECT releases the PUBs held for it: decided at once.
        if session.release_held() {
            client.read(&[], &mut session, &mut gate);
        }
    }
});
