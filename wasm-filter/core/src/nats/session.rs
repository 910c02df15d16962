//! One NATS client connection as the filter sees it, both directions. Limit decisions are asked
//! of a [`Gate`]; the session turns them into NATS protocol the client understands:
//!
//! - A refused message is replaced by a `PING` to the server; the `PONG` that answers it is
//!   swapped for the client's non-fatal `-ERR 'Permissions Violation …'`. PONGs come back in the
//!   order of the PINGs, so the session keeps a queue of who owns each outstanding PING. A
//!   refused request (it has a reply subject) is also sent to a subject nobody subscribes to,
//!   so nats-server itself answers the requester with a no-responders status. A refused reply
//!   (a publish to an `_INBOX.` subject) is replaced by that status, sent to the requester
//!   waiting for it, when the responder's connection speaks headers.
//! - An oversized message is replaced by a PUB whose size exceeds any server's max_payload:
//!   nats-server answers `-ERR 'Maximum Payload Violation'` and closes, as it would have.
//! - After the PONG that completes the client's connect handshake, an INFO carrying the
//!   tenant's `max_payload` follows (nats.go expects PONG as the very next line after its
//!   CONNECT+PING; an async INFO after it updates `MaxPayload()`).
//! - Every INFO is rewritten by super::info: it names the gateway, never a server, and says what
//!   the client's own connection is (`tls_required` when Envoy terminated TLS for it, neither
//!   `tls_required` nor `tls_available` when it is plaintext — the gateway's TLS to nats-server
//!   is none of the client's business). An INFO it cannot read ends the connection
//!   ([`Session::unreadable_info`]): it never reaches the client as the server sent it.
//! - Credentials count only once nats-server accepted them. The client's CONNECT is followed by
//!   the filter's own PING: nats-server answers a CONNECT it refuses with `-ERR` (and closes),
//!   one it accepts with `+OK` (verbose clients) and then that PING's PONG, which the client
//!   never sees. Until that verdict the client's PUBs are held — not forwarded, not charged to
//!   anyone — and then charged to the tenant the accepted credentials name.
//! - As a trusted proxy the filter adds `proxy_sig` (the INFO nonce signed with the gateway's
//!   nkey) to the CONNECT, so users nats-server marks `proxy_required` connect only through it.
//! - A connection over the tenant's connection limit gets `-ERR 'maximum connections exceeded …'`
//!   in place of the verdict; nats.go closes on it, and anything it sends after is answered by
//!   nats-server closing the connection.

use std::collections::VecDeque;
use std::rc::Rc;

use super::info::{self, ClientView, Listener, Unreadable};
use super::server::{Delivered, ServerEdit, ServerHandler, ServerOp, ServerStream};
use super::stream::{ClientHandler, ClientStream, Publish};
use crate::backlog::{Backlog, Standing};
use crate::identity::NatsCredentials;
use crate::scan::{Admission, Outcome};
use crate::source::Source;

/// Sent to nats-server in place of an oversized message: no server's max_payload reaches 1 GB.
pub const SERVER_REFUSES_PAYLOAD: &[u8] = b"PUB _WEIGHSTATION.MAX_PAYLOAD 999999999\r\n";
/// A subject for refused requests: with no subscriber, nats-server replies "no responders".
const NO_RESPONDERS_SUBJECT: &str = "_WEIGHSTATION.REFUSED";
/// Where nats.go's requests wait for their reply (its default inbox prefix).
const INBOX_PREFIX: &[u8] = b"_INBOX.";
/// The no-responders status nats-server sends a requester, as headers of an empty message.
const NO_RESPONDERS_STATUS: &[u8] = b"NATS/1.0 503\r\n\r\n";

/// Sent to nats-server in place of the CONNECT of a plaintext client on a TLS-first listener.
pub const TLS_FIRST_CONNECT: &[u8] = br#"{"verbose":false,"pedantic":false}"#;

/// Told to a plaintext client on a TLS-first listener, in place of the answer to its CONNECT.
pub const TLS_FIRST_REQUIRED: &str = "weighstation: this listener needs the TLS handshake first: \
     nats.go TLSHandshakeFirst(), nats CLI --tlsfirst, handshake_first in a leafnode remote";

/// The filter's limit decision for one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Forward,
    /// Not now: the glue holds the connection and asks again later.
    Hold,
    /// Not forwarded; the text is sent to the client as a non-fatal -ERR.
    Refuse(String),
    /// Over maxMessageBytes: refused the way nats-server does, by closing.
    Close,
    /// Forwarded as these bytes instead (a JetStream pull with its max_bytes lowered).
    Rewrite(Vec<u8>),
}

/// Limit decisions, attribution and accounting, supplied by the glue.
pub trait Gate {
    /// nats-server accepted the client's CONNECT: attribute the connection by these
    /// credentials; Err(text) refuses it (the tenant's connection limit).
    fn authenticated(&mut self, credentials: NatsCredentials) -> Result<(), String>;
    /// nats-server refused the client's CONNECT because of its credentials.
    fn authentication_failed(&mut self);
    /// `proxy_sig` for the nonce of the server's INFO, when the gateway is a trusted proxy.
    fn proxy_signature(&self, nonce: &str) -> Option<String>;
    fn publish(&mut self, publish: &Publish<'_>) -> Verdict;
    /// A SUB to `subject`: Forward, or Refuse with the text of a non-fatal -ERR.
    fn subscribe(&mut self, subject: &[u8]) -> Verdict;
    /// A message delivered to the client (a reply may release an in-flight slot). False if the
    /// client is a slow consumer: nothing more is forwarded from the server and the glue ends
    /// the connection, as nats-server ends one.
    fn delivered(&mut self, delivered: &Delivered<'_>) -> bool;
    /// The max_payload to advertise, once the tenant is known.
    fn max_payload(&self) -> Option<u64>;
}

/// `-ERR '…'\r\n` around an error's text.
const ERR_LINE_FRAME: usize = "-ERR ''\r\n".len();

#[derive(Debug, Clone, PartialEq, Eq)]
enum PongOwner {
    Client,
    Refusal(String),
    /// The PING the filter sent after the CONNECT: its PONG is nats-server's verdict.
    Verdict,
    /// The PING the filter sent in place of a CONNECT it refuses: its PONG becomes this error,
    /// and the connection ends.
    Fatal(&'static str),
}

impl PongOwner {
    /// What the client is sent when this PING's PONG comes back: what the gateway owes it.
    fn owed(&self) -> usize {
        match self {
            PongOwner::Client => b"PONG\r\n".len(),
            PongOwner::Refusal(text) => text.len() + ERR_LINE_FRAME,
            PongOwner::Verdict => 0,
            PongOwner::Fatal(text) => text.len() + ERR_LINE_FRAME,
        }
    }
}

/// Where the connection stands with nats-server.
#[derive(Debug, Default)]
enum Authentication {
    /// No CONNECT yet: whatever is published is the default tenant's (nats-server refuses it
    /// if it requires authentication).
    #[default]
    BeforeConnect,
    /// CONNECT sent; nats-server has not answered it. PUBs wait.
    Awaiting(NatsCredentials),
    Accepted,
    /// nats-server refused the credentials, or the tenant's connection limit refused the
    /// connection: nothing more is forwarded.
    Refused,
}

#[derive(Debug, Default)]
pub struct Session {
    client: ClientStream,
    server: ServerStream,
    state: State,
}

/// What both directions share.
#[derive(Debug, Default)]
struct State {
    pongs: VecDeque<PongOwner>,
    /// What the outstanding PINGs will send the client (crate::backlog): past its bound nothing
    /// more is read from the client.
    backlog: Backlog,
    /// The client finished CONNECT: the INFO with its tenant's limit follows the next client PONG.
    info_after_pong: bool,
    /// The limit changed on a live connection: send an INFO at the next safe point.
    info_now: bool,
    server_info: Option<Vec<u8>>,
    /// The server's max_payload, from its last INFO.
    server_max_payload: Option<u64>,
    advertised: Option<u64>,
    /// The client's CONNECT declared headers: it may publish HPUB.
    headers: bool,
    authentication: Authentication,
    /// A PUB is held until nats-server answers the CONNECT.
    held_for_verdict: bool,
    /// The client reached the gateway over TLS.
    client_tls: bool,
    /// The client reached a TLS-first listener in plaintext: its CONNECT is refused.
    tls_first_required: bool,
    /// The gateway listener the client reached, as its INFOs name it.
    listener: Option<Rc<Listener>>,
    /// The client's address as the gateway sees it (INFO `client_ip`).
    client_ip: Option<String>,
    /// The server sent an INFO the rewriter could not read: the connection ends.
    unreadable_info: Option<Unreadable>,
}

impl State {
    /// A PING goes to the server; its PONG is the owner's.
    fn ping_for(&mut self, owner: PongOwner) {
        self.backlog.owe(owner.owed());
        self.pongs.push_back(owner);
    }

    /// A PONG came back: the PING it answers.
    fn pong(&mut self) -> Option<PongOwner> {
        let owner = self.pongs.pop_front()?;
        self.backlog.paid(owner.owed());
        Some(owner)
    }
}

impl Session {
    /// Says whether the client's connection to the gateway is TLS, before the server's first
    /// bytes: the INFOs it is sent say so.
    pub fn client_tls(&mut self, tls: bool) {
        self.state.client_tls = tls;
    }

    /// The gateway listener the client reached and the client's own address, before the
    /// server's first bytes: every INFO names these instead of the server's.
    pub fn client_reached(&mut self, listener: Option<Rc<Listener>>, client_ip: Option<String>) {
        self.state.listener = listener;
        self.state.client_ip = client_ip;
    }

    /// Why the connection must end, once the server sent an INFO the rewriter could not read
    /// (nothing more is forwarded from the server): the glue closes it and logs the reason.
    pub fn unreadable_info(&self) -> Option<Unreadable> {
        self.state.unreadable_info
    }

    /// The client reached a TLS-first listener without TLS (the classic upgrade, which the
    /// filter cannot do): its CONNECT never reaches nats-server, and it is told which option
    /// to set — an error it reads, where a closed connection would leave it guessing.
    pub fn require_tls_first(&mut self) {
        self.state.tls_first_required = true;
    }

    /// Client → server bytes.
    pub fn client_data(&mut self, src: &mut dyn Source, gate: &mut impl Gate) -> Outcome {
        self.client.process(
            src,
            &mut ClientSide {
                state: &mut self.state,
                gate,
            },
        )
    }

    /// Server → client bytes; returns what to forward instead, if it differs.
    pub fn server_data(&mut self, src: &mut dyn Source, gate: &mut impl Gate) -> Option<Vec<u8>> {
        self.server.process(
            src,
            &mut ServerSide {
                state: &mut self.state,
                gate,
            },
        )
    }

    /// True once, when nats-server has answered the CONNECT and PUBs were held for its
    /// verdict: the glue decides them now rather than waiting for more client bytes.
    pub fn release_held(&mut self) -> bool {
        let known = matches!(
            self.state.authentication,
            Authentication::Accepted | Authentication::Refused
        );
        let verdict = known && std::mem::take(&mut self.state.held_for_verdict);
        // Both are taken: either releases the same held bytes.
        let backlog = self.state.backlog.released();
        verdict || backlog
    }

    /// Bytes of its own the gateway may owe the client before reading nothing more from it.
    pub fn set_backlog_limit(&mut self, bytes: u64) {
        self.state.backlog.set_limit(bytes);
    }

    /// The most the glue carries behind a held operation (crate::backlog::Backlog::holds).
    pub fn set_carry_limit(&mut self, bytes: usize) {
        let backlog = std::mem::take(&mut self.state.backlog);
        self.state.backlog = backlog.carrying(bytes);
    }

    /// Where the client stands with what it is owed (crate::backlog) at `now`.
    pub fn backlog_standing(&mut self, now: u64, deadline_ns: u64) -> Standing {
        self.state.backlog.standing(now, deadline_ns)
    }

    /// Past the bound: nothing more is read from the client.
    pub fn backlogged(&self) -> bool {
        self.state.backlog.over()
    }

    /// What the gateway owes the client, in bytes.
    pub fn owed(&self) -> u64 {
        self.state.backlog.owed()
    }

    /// The first `n` bytes of a held buffer were forwarded.
    pub fn forwarded(&mut self, n: usize) {
        self.client.forwarded(n);
    }

    /// Called when the tenant's advertised limit may have changed (a policy reload).
    pub fn limit_changed(&mut self, gate: &impl Gate) {
        let st = &mut self.state;
        if st.server_info.is_some() && !st.info_after_pong && gate.max_payload() != st.advertised {
            st.info_now = true;
        }
    }
}

struct ClientSide<'a, G> {
    state: &'a mut State,
    gate: &'a mut G,
}

impl<G: Gate> ClientSide<'_, G> {
    /// `CONNECT json` signed as the gateway's trusted proxy (when it is one), and a PING.
    fn signed_connect(&self, json: &[u8]) -> Vec<u8> {
        let signature = self
            .state
            .server_info
            .as_deref()
            .and_then(nonce)
            .and_then(|n| self.gate.proxy_signature(&n));
        let mut with = b"CONNECT ".to_vec();
        match signature {
            Some(sig) => with.extend_from_slice(&with_proxy_sig(json, &sig)),
            None => with.extend_from_slice(json),
        }
        with.extend_from_slice(b"\r\nPING\r\n");
        with
    }
}

impl<G: Gate> ClientHandler for ClientSide<'_, G> {
    fn connect(&mut self, json: &[u8]) -> Admission {
        if !matches!(self.state.authentication, Authentication::BeforeConnect) {
            return Admission::Forward; // nats-server judges a second CONNECT
        }
        if self.state.tls_first_required {
            // Nothing of the client's CONNECT goes upstream: a CONNECT without credentials (the
            // server's no-credentials user, through its trusted proxy; not verbose, which
            // nats-server otherwise assumes) and a PING, whose PONG carries the error to the
            // client in order.
            self.state.authentication = Authentication::Refused;
            self.state.ping_for(PongOwner::Fatal(TLS_FIRST_REQUIRED));
            return Admission::Replace(self.signed_connect(TLS_FIRST_CONNECT));
        }
        let connect = super::parse_connect(json);
        self.state.headers = connect.headers;
        self.state.authentication = Authentication::Awaiting(connect.credentials());
        self.state.ping_for(PongOwner::Verdict);
        Admission::Replace(self.signed_connect(json))
    }

    fn ping(&mut self) {
        self.state.ping_for(PongOwner::Client);
    }

    fn backlogged(&self, at: usize, rest: usize) -> bool {
        self.state.backlog.holds(at, rest)
    }

    fn subscribe(&mut self, subject: &[u8]) -> Admission {
        if let Authentication::Awaiting(_) = self.state.authentication {
            // Whose subscription it is, and so what it may read, is nats-server's verdict.
            self.state.held_for_verdict = true;
            return Admission::Hold;
        }
        match self.gate.subscribe(subject) {
            Verdict::Refuse(text) => {
                // As a refused PUB: a PING in its place, whose PONG becomes the -ERR.
                self.state.ping_for(PongOwner::Refusal(text));
                Admission::Replace(b"PING\r\n".to_vec())
            }
            _ => Admission::Forward,
        }
    }

    fn publish(&mut self, p: &Publish<'_>) -> Admission {
        match self.state.authentication {
            Authentication::Awaiting(_) => {
                self.state.held_for_verdict = true;
                return Admission::Hold;
            }
            Authentication::Refused => return Admission::Close(SERVER_REFUSES_PAYLOAD.to_vec()),
            Authentication::Accepted
                if self.state.info_after_pong && !self.state.pongs.contains(&PongOwner::Client) =>
            {
                // It publishes without waiting for a handshake PONG: its INFO need not wait.
                self.state.info_after_pong = false;
                self.state.info_now = true;
            }
            Authentication::BeforeConnect | Authentication::Accepted => {}
        }
        let p = Publish {
            server_max_payload: self.state.server_max_payload,
            ..*p
        };
        match self.gate.publish(&p) {
            Verdict::Forward => Admission::Forward,
            Verdict::Hold => Admission::Hold,
            Verdict::Rewrite(with) => Admission::Replace(with),
            Verdict::Close => Admission::Close(SERVER_REFUSES_PAYLOAD.to_vec()),
            Verdict::Refuse(text) => {
                self.state.ping_for(PongOwner::Refusal(text));
                let mut with = Vec::with_capacity(64);
                // Whoever waits for an answer hears no-responders at once instead of waiting
                // out its timeout: the requester of a refused request from nats-server itself
                // (it answers a request nobody subscribes to), the requester of a refused reply
                // from the filter.
                if let Some(reply) = p.reply {
                    with.extend_from_slice(b"PUB ");
                    with.extend_from_slice(NO_RESPONDERS_SUBJECT.as_bytes());
                    with.push(b' ');
                    with.extend_from_slice(reply);
                    with.extend_from_slice(b" 0\r\n\r\n");
                } else if self.state.headers && p.subject.starts_with(INBOX_PREFIX) {
                    let n = NO_RESPONDERS_STATUS.len();
                    with.extend_from_slice(b"HPUB ");
                    with.extend_from_slice(p.subject);
                    with.extend_from_slice(format!(" {n} {n}\r\n").as_bytes());
                    with.extend_from_slice(NO_RESPONDERS_STATUS);
                    with.extend_from_slice(b"\r\n");
                }
                with.extend_from_slice(b"PING\r\n");
                Admission::Replace(with)
            }
        }
    }
}

struct ServerSide<'a, G> {
    state: &'a mut State,
    gate: &'a mut G,
}

fn err_line(text: &str) -> Vec<u8> {
    format!("-ERR '{text}'\r\n").into_bytes()
}

impl<G: Gate> ServerSide<'_, G> {
    /// The server's last INFO as this client must see it (super::info); Err if it cannot be
    /// read, and the connection ends.
    fn client_info(&mut self) -> Option<Result<Vec<u8>, Unreadable>> {
        let max = self.gate.max_payload();
        let st = &*self.state;
        let view = ClientView {
            listener: st.listener.as_deref(),
            max_payload: max,
            tls: st.client_tls,
            client_ip: st.client_ip.as_deref(),
        };
        let line = info::rewrite(st.server_info.as_deref()?, &view);
        if max.is_some() && line.is_ok() {
            self.state.advertised = max;
        }
        Some(line)
    }

    /// Forward `line` (an INFO for the client) by `edit`, or end the connection if the
    /// server's INFO could not be read.
    fn info_edit(&mut self, line: Result<Vec<u8>, Unreadable>, edit: fn(Vec<u8>) -> ServerEdit) -> ServerEdit {
        match line {
            Ok(line) => edit(line),
            Err(why) => {
                self.state.unreadable_info = Some(why);
                ServerEdit::ReplaceThenEnd(Vec::new())
            }
        }
    }

    /// nats-server accepted the CONNECT (`+OK` or the verdict PONG): commit the credentials.
    /// The tenant's INFO waits for the PONG of the client's handshake PING (nats.go wants PONG
    /// right after CONNECT+PING, and that PING may reach the filter after the verdict); a
    /// client that publishes without one gets it at once (see ClientSide::publish). Err(line)
    /// if the connection is refused.
    fn accepted(&mut self) -> Result<(), Vec<u8>> {
        let Authentication::Awaiting(credentials) = std::mem::take(&mut self.state.authentication) else {
            return Ok(());
        };
        if let Err(text) = self.gate.authenticated(credentials) {
            self.state.authentication = Authentication::Refused;
            return Err(err_line(&text));
        }
        self.state.authentication = Authentication::Accepted;
        self.state.info_after_pong = true;
        Ok(())
    }

    /// `-ERR` before the verdict: nats-server refused the CONNECT and is closing.
    fn refused(&mut self, text: &[u8]) {
        if !matches!(self.state.authentication, Authentication::Awaiting(_)) {
            return;
        }
        self.state.authentication = Authentication::Refused;
        if is_authentication_error(text) {
            self.gate.authentication_failed();
        }
    }
}

/// nats-server's errors for credentials it does not accept.
fn is_authentication_error(text: &[u8]) -> bool {
    let t = String::from_utf8_lossy(text).to_ascii_lowercase();
    t.contains("authorization violation") || t.contains("authentication")
}

/// The max_payload of a server INFO, if it said.
fn max_payload(info: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Info {
        max_payload: Option<u64>,
    }
    serde_json::from_slice::<Info>(info).ok()?.max_payload
}

/// The nonce of a server INFO, if it sent one (it does when it checks nkeys, JWTs or proxies).
fn nonce(info: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Info {
        nonce: Option<String>,
    }
    serde_json::from_slice::<Info>(info).ok()?.nonce
}

/// The CONNECT JSON with `proxy_sig` as its last member: if the client sent one too, the last
/// wins in nats-server's decoder, so the gateway's is the one checked.
fn with_proxy_sig(json: &[u8], sig: &str) -> Vec<u8> {
    let end = json.iter().rposition(|&b| b == b'}').unwrap_or(json.len());
    let head = json[..end].trim_ascii_end();
    let mut out = head.to_vec();
    if head.last().is_some_and(|&b| b != b'{') {
        out.push(b',');
    }
    out.extend_from_slice(b"\"proxy_sig\":\"");
    out.extend_from_slice(sig.as_bytes());
    out.extend_from_slice(b"\"}");
    out
}

impl<G: Gate> ServerHandler for ServerSide<'_, G> {
    fn op(&mut self, op: &ServerOp<'_>) -> ServerEdit {
        let edit = match op {
            ServerOp::Info { json } => {
                self.state.server_info = Some(json.to_vec());
                self.state.server_max_payload = max_payload(json);
                self.state.info_now = false;
                if self.state.info_after_pong {
                    // nats-server sends one after the verdict's PONG, while the client still
                    // waits for its handshake PONG: it follows that PONG instead.
                    return ServerEdit::Replace(Vec::new());
                }
                match self.client_info() {
                    Some(line) => return self.info_edit(line, ServerEdit::Replace),
                    None => ServerEdit::Keep,
                }
            }
            ServerOp::Msg(d) => {
                if !self.gate.delivered(d) {
                    return ServerEdit::ReplaceThenEnd(Vec::new());
                }
                return ServerEdit::Keep; // never insert inside a payload
            }
            ServerOp::Ok => match self.accepted() {
                Ok(()) => ServerEdit::Keep,
                Err(line) => return ServerEdit::ReplaceThenEnd(line),
            },
            ServerOp::Err { text } => {
                self.refused(text);
                ServerEdit::Keep
            }
            ServerOp::Pong => match self.state.pong() {
                Some(PongOwner::Refusal(text)) => return ServerEdit::Replace(err_line(&text)),
                Some(PongOwner::Fatal(text)) => return ServerEdit::ReplaceThenEnd(err_line(text)),
                Some(PongOwner::Verdict) => {
                    return match self.accepted() {
                        Ok(()) => ServerEdit::Replace(Vec::new()),
                        Err(line) => ServerEdit::ReplaceThenEnd(line),
                    }
                }
                Some(PongOwner::Client) | None => {
                    if std::mem::take(&mut self.state.info_after_pong) {
                        if let Some(line) = self.client_info() {
                            return self.info_edit(line, ServerEdit::KeepThenInsert);
                        }
                    }
                    ServerEdit::Keep
                }
            },
            ServerOp::Ping | ServerOp::Other => ServerEdit::Keep,
        };
        if edit == ServerEdit::Keep && std::mem::take(&mut self.state.info_now) {
            if let Some(line) = self.client_info() {
                return self.info_edit(line, ServerEdit::KeepThenInsert);
            }
        }
        edit
    }

    fn too_long(&mut self) {
        self.state.unreadable_info = Some(Unreadable::TooLong);
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "session_backlog_tests.rs"]
mod backlog_tests;
