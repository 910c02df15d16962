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
//!   CONNECT+PING; an async INFO after it updates `MaxPayload()`). Later INFOs are rewritten.
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

use super::server::{ServerEdit, ServerHandler, ServerOp, ServerStream};
use super::stream::{ClientHandler, ClientStream, Publish};
use crate::identity::NatsCredentials;
use crate::scan::{Admission, Outcome};

/// Sent to nats-server in place of an oversized message: no server's max_payload reaches 1 GB.
pub const SERVER_REFUSES_PAYLOAD: &[u8] = b"PUB _WEIGHSTATION.MAX_PAYLOAD 999999999\r\n";
/// A subject for refused requests: with no subscriber, nats-server replies "no responders".
const NO_RESPONDERS_SUBJECT: &str = "_WEIGHSTATION.REFUSED";
/// Where nats.go's requests wait for their reply (its default inbox prefix).
const INBOX_PREFIX: &[u8] = b"_INBOX.";
/// The no-responders status nats-server sends a requester, as headers of an empty message.
const NO_RESPONDERS_STATUS: &[u8] = b"NATS/1.0 503\r\n\r\n";

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
    /// A message delivered to the client on `subject` (a reply may release an in-flight slot).
    fn delivered(&mut self, subject: &[u8]);
    /// The max_payload to advertise, once the tenant is known.
    fn max_payload(&self) -> Option<u64>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PongOwner {
    Client,
    Refusal(String),
    /// The PING the filter sent after the CONNECT: its PONG is nats-server's verdict.
    Verdict,
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
    /// The client finished CONNECT: the INFO with its tenant's limit follows the next client PONG.
    info_after_pong: bool,
    /// An INFO arrived while the client still waited for its handshake PONG (nats-server sends
    /// one after the first PONG — the verdict's): it follows that PONG instead.
    info_deferred: bool,
    /// The limit changed on a live connection: send an INFO at the next safe point.
    info_now: bool,
    server_info: Option<Vec<u8>>,
    advertised: Option<u64>,
    /// The client's CONNECT declared headers: it may publish HPUB.
    headers: bool,
    authentication: Authentication,
    /// A PUB is held until nats-server answers the CONNECT.
    held_for_verdict: bool,
}

impl Session {
    /// Client → server bytes.
    pub fn client_data(&mut self, buf: &[u8], gate: &mut impl Gate) -> Outcome {
        self.client.process(
            buf,
            &mut ClientSide {
                state: &mut self.state,
                gate,
            },
        )
    }

    /// Server → client bytes; returns what to forward instead, if it differs.
    pub fn server_data(&mut self, chunk: &[u8], gate: &mut impl Gate) -> Option<Vec<u8>> {
        self.server.process(
            chunk,
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
        known && std::mem::take(&mut self.state.held_for_verdict)
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

impl<G: Gate> ClientHandler for ClientSide<'_, G> {
    fn connect(&mut self, json: &[u8]) -> Admission {
        if !matches!(self.state.authentication, Authentication::BeforeConnect) {
            return Admission::Forward; // nats-server judges a second CONNECT
        }
        let connect = super::parse_connect(json);
        self.state.headers = connect.headers;
        self.state.authentication = Authentication::Awaiting(connect.credentials());
        self.state.pongs.push_back(PongOwner::Verdict);
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
        Admission::Replace(with)
    }

    fn ping(&mut self) {
        self.state.pongs.push_back(PongOwner::Client);
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
        match self.gate.publish(p) {
            Verdict::Forward => Admission::Forward,
            Verdict::Hold => Admission::Hold,
            Verdict::Close => Admission::Close(SERVER_REFUSES_PAYLOAD.to_vec()),
            Verdict::Refuse(text) => {
                self.state.pongs.push_back(PongOwner::Refusal(text));
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
    /// The server's last INFO with max_payload lowered to the tenant's limit.
    fn tenant_info(&mut self) -> Option<Vec<u8>> {
        let max = self.gate.max_payload()?;
        let line = info_with_max_payload(self.state.server_info.as_deref()?, max)?;
        self.state.advertised = Some(max);
        Some(line)
    }

    /// The server's last INFO as it sent it.
    fn server_info_line(&self) -> Option<Vec<u8>> {
        let json = self.state.server_info.as_deref()?;
        Some([b"INFO ", json, b"\r\n"].concat())
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

    /// The INFO owed to the client: the server's last, with the tenant's max_payload when it has
    /// one, or as the server sent it if it was held back.
    fn owed_info(&mut self) -> Option<Vec<u8>> {
        let deferred = std::mem::take(&mut self.state.info_deferred);
        self.tenant_info()
            .or_else(|| deferred.then(|| self.server_info_line()).flatten())
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
                self.state.info_now = false;
                if self.state.info_after_pong {
                    self.state.info_deferred = true;
                    return ServerEdit::Replace(Vec::new());
                }
                match self.tenant_info() {
                    Some(line) => ServerEdit::Replace(line),
                    None => ServerEdit::Keep,
                }
            }
            ServerOp::Msg { subject } => {
                self.gate.delivered(subject);
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
            ServerOp::Pong => match self.state.pongs.pop_front() {
                Some(PongOwner::Refusal(text)) => return ServerEdit::Replace(err_line(&text)),
                Some(PongOwner::Verdict) => {
                    return match self.accepted() {
                        Ok(()) => ServerEdit::Replace(Vec::new()),
                        Err(line) => ServerEdit::ReplaceThenEnd(line),
                    }
                }
                Some(PongOwner::Client) | None => {
                    if std::mem::take(&mut self.state.info_after_pong) {
                        if let Some(line) = self.owed_info() {
                            return ServerEdit::KeepThenInsert(line);
                        }
                    }
                    ServerEdit::Keep
                }
            },
            ServerOp::Ping | ServerOp::Other => ServerEdit::Keep,
        };
        if edit == ServerEdit::Keep && std::mem::take(&mut self.state.info_now) {
            if let Some(line) = self.owed_info() {
                return ServerEdit::KeepThenInsert(line);
            }
        }
        edit
    }
}

/// `INFO {...}` with max_payload set to the smaller of the server's and `max`.
fn info_with_max_payload(json: &[u8], max: u64) -> Option<Vec<u8>> {
    let mut info: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(json).ok()?;
    let server_max = info
        .get("max_payload")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(u64::MAX);
    info.insert("max_payload".into(), server_max.min(max).into());
    let mut line = b"INFO ".to_vec();
    serde_json::to_writer(&mut line, &info).ok()?;
    line.extend_from_slice(b"\r\n");
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct FakeGate {
        accepted: Vec<NatsCredentials>,
        failures: usize,
        refuse_connection: bool,
        /// The tenant has no size limit to advertise.
        unlimited: bool,
        signs: bool,
        verdicts: VecDeque<Verdict>,
        published: usize,
        delivered: Vec<Vec<u8>>,
        max: Option<u64>,
    }

    impl Gate for FakeGate {
        fn authenticated(&mut self, credentials: NatsCredentials) -> Result<(), String> {
            self.accepted.push(credentials);
            if self.refuse_connection {
                return Err("maximum connections exceeded (connections limit of tenant acme: 1)".into());
            }
            self.max = (!self.unlimited).then_some(1024);
            Ok(())
        }
        fn authentication_failed(&mut self) {
            self.failures += 1;
        }
        fn proxy_signature(&self, nonce: &str) -> Option<String> {
            self.signs.then(|| format!("signed({nonce})"))
        }
        fn publish(&mut self, _: &Publish<'_>) -> Verdict {
            self.published += 1;
            self.verdicts.pop_front().unwrap_or(Verdict::Forward)
        }
        fn delivered(&mut self, subject: &[u8]) {
            self.delivered.push(subject.to_vec());
        }
        fn max_payload(&self) -> Option<u64> {
            self.max
        }
    }

    const SERVER_INFO: &[u8] = b"INFO {\"server_id\":\"S\",\"headers\":true,\"max_payload\":8388608}\r\n";

    fn client(s: &mut Session, g: &mut FakeGate, bytes: &[u8]) -> Vec<u8> {
        let o = s.client_data(bytes, g);
        assert!(!o.hold);
        o.replace.unwrap_or_else(|| bytes.to_vec())
    }

    fn server(s: &mut Session, g: &mut FakeGate, bytes: &[u8]) -> Vec<u8> {
        s.server_data(bytes, g).unwrap_or_else(|| bytes.to_vec())
    }

    fn text(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    /// A session past its handshake, as nats.go does it.
    fn connected(g: &mut FakeGate) -> Session {
        let mut s = Session::default();
        server(&mut s, g, SERVER_INFO);
        client(&mut s, g, b"CONNECT {\"user\":\"acme\"}\r\nPING\r\n");
        server(&mut s, g, b"PONG\r\nPONG\r\n");
        s
    }

    #[test]
    fn credentials_count_only_once_the_server_accepts_them() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        assert_eq!(
            server(&mut s, &mut g, SERVER_INFO),
            SERVER_INFO,
            "before CONNECT the tenant is unknown"
        );
        let sent = client(&mut s, &mut g, b"CONNECT {\"user\":\"acme\"}\r\nPING\r\n");
        assert_eq!(
            text(&sent),
            "CONNECT {\"user\":\"acme\"}\r\nPING\r\nPING\r\n",
            "the filter's PING goes first"
        );
        assert!(g.accepted.is_empty(), "not before the server's verdict");
        let out = text(&server(&mut s, &mut g, b"PONG\r\nPONG\r\n"));
        assert_eq!(g.accepted.len(), 1);
        assert_eq!(g.accepted[0].user.as_deref(), Some("acme"));
        assert!(
            out.starts_with("PONG\r\nINFO {"),
            "one PONG, the client's, then the INFO: {out}"
        );
        assert!(
            out.contains("\"max_payload\":1024") && out.contains("\"headers\":true"),
            "{out}"
        );
        assert_eq!(server(&mut s, &mut g, b"PONG\r\n"), b"PONG\r\n", "only once");
    }

    #[test]
    fn the_info_nats_server_sends_after_the_verdict_waits_for_the_clients_pong() {
        const AFTER_VERDICT: &[u8] = b"PONG\r\nINFO {\"server_id\":\"S\",\"connect_info\":true}\r\nPONG\r\n";
        for unlimited in [false, true] {
            let mut g = FakeGate {
                unlimited,
                ..FakeGate::default()
            };
            let mut s = Session::default();
            server(&mut s, &mut g, SERVER_INFO);
            client(&mut s, &mut g, b"CONNECT {\"protocol\":1}\r\nPING\r\n");
            let out = text(&server(&mut s, &mut g, AFTER_VERDICT));
            assert!(out.starts_with("PONG\r\nINFO {"), "nats.go wants PONG first: {out}");
            assert!(out.contains("\"connect_info\":true"), "{out}");
            assert_eq!(out.contains("\"max_payload\":1024"), !unlimited, "{out}");
        }
    }

    #[test]
    fn a_handshake_ping_that_arrives_after_the_verdict_still_gets_its_pong_first() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        server(&mut s, &mut g, SERVER_INFO);
        client(&mut s, &mut g, b"CONNECT {\"protocol\":1}\r\n");
        let out = text(&server(
            &mut s,
            &mut g,
            b"PONG\r\nINFO {\"server_id\":\"S\",\"connect_info\":true}\r\n",
        ));
        assert_eq!(out, "", "verdict PONG swallowed, the server's INFO held back");
        client(&mut s, &mut g, b"PING\r\n");
        let out = text(&server(&mut s, &mut g, b"PONG\r\n"));
        assert!(out.starts_with("PONG\r\nINFO {"), "{out}");
        assert!(out.contains("\"connect_info\":true"), "{out}");
    }

    #[test]
    fn publishes_before_the_verdict_wait_for_it_and_are_then_charged() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        server(&mut s, &mut g, SERVER_INFO);
        let o = s.client_data(b"CONNECT {\"user\":\"acme\"}\r\nPUB a 1\r\nx\r\n", &mut g);
        assert!(o.hold, "the PUB waits");
        let replaced = o.replace.clone().unwrap_or_default();
        assert_eq!(
            text(&replaced[..o.decided]),
            "CONNECT {\"user\":\"acme\"}\r\nPING\r\n",
            "the CONNECT goes ahead"
        );
        assert_eq!(g.published, 0, "nothing charged yet");
        assert!(!s.release_held());
        let out = text(&server(&mut s, &mut g, b"PONG\r\n"));
        assert_eq!(out, "", "no PONG the client did not ask for");
        assert!(s.release_held());
        assert!(!s.release_held(), "once");
        s.forwarded(o.decided);
        let again = s.client_data(b"PUB a 1\r\nx\r\n", &mut g);
        assert!(!again.hold);
        assert_eq!(g.published, 1, "decided once the tenant is known");
        let out = text(&server(&mut s, &mut g, b"PING\r\n"));
        assert!(
            out.starts_with("PING\r\nINFO {"),
            "a client that publishes without a handshake PING gets its INFO at once: {out}"
        );
    }

    #[test]
    fn refused_credentials_charge_no_one_and_are_counted() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        server(&mut s, &mut g, SERVER_INFO);
        let o = s.client_data(
            b"CONNECT {\"user\":\"globex\",\"pass\":\"wrong\"}\r\nPUB a 1\r\nx\r\n",
            &mut g,
        );
        assert!(o.hold);
        let out = server(&mut s, &mut g, b"-ERR 'Authorization Violation'\r\n");
        assert_eq!(text(&out), "-ERR 'Authorization Violation'\r\n", "the client hears why");
        assert_eq!((g.failures, g.accepted.len()), (1, 0));
        assert!(s.release_held());
        s.forwarded(o.decided);
        let again = s.client_data(b"PUB a 1\r\nx\r\n", &mut g);
        assert_eq!(
            again.replace.as_deref(),
            Some(SERVER_REFUSES_PAYLOAD),
            "never forwarded"
        );
        assert_eq!(g.published, 0, "never charged");
    }

    #[test]
    fn another_error_before_the_verdict_refuses_without_counting_an_authentication_failure() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        assert!(s.client_data(b"CONNECT {}\r\nPUB a 1\r\nx\r\n", &mut g).hold);
        server(&mut s, &mut g, b"-ERR 'maximum connections exceeded'\r\n");
        assert_eq!(g.failures, 0);
        assert!(s.release_held(), "the held PUB is decided: refused");
    }

    #[test]
    fn a_verbose_client_is_accepted_at_its_ok() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        server(&mut s, &mut g, SERVER_INFO);
        client(&mut s, &mut g, b"CONNECT {\"verbose\":true,\"user\":\"acme\"}\r\n");
        assert_eq!(server(&mut s, &mut g, b"+OK\r\n"), b"+OK\r\n");
        assert_eq!(g.accepted.len(), 1);
        assert_eq!(
            server(&mut s, &mut g, b"PONG\r\n"),
            b"",
            "the filter's PONG is not the client's"
        );
        client(&mut s, &mut g, b"PING\r\n");
        let out = text(&server(&mut s, &mut g, b"PONG\r\n"));
        assert!(out.starts_with("PONG\r\nINFO {"), "{out}");
    }

    #[test]
    fn a_connection_over_the_limit_hears_why_in_place_of_the_verdict() {
        let mut g = FakeGate {
            refuse_connection: true,
            ..FakeGate::default()
        };
        let mut s = Session::default();
        client(&mut s, &mut g, b"CONNECT {\"user\":\"acme\"}\r\nPING\r\n");
        let got = text(&server(&mut s, &mut g, b"PONG\r\nPONG\r\n"));
        assert_eq!(
            got, "-ERR 'maximum connections exceeded (connections limit of tenant acme: 1)'\r\n",
            "and nothing after it"
        );
        let sent = client(&mut s, &mut g, b"PUB a 1\r\nx\r\n");
        assert_eq!(sent, SERVER_REFUSES_PAYLOAD, "nats-server closes the connection");
    }

    #[test]
    fn the_gateway_signs_the_servers_nonce_as_a_trusted_proxy() {
        let mut g = FakeGate {
            signs: true,
            ..FakeGate::default()
        };
        let mut s = Session::default();
        server(&mut s, &mut g, b"INFO {\"server_id\":\"S\",\"nonce\":\"abc-_\"}\r\n");
        let sent = text(&client(
            &mut s,
            &mut g,
            b"CONNECT {\"user\":\"acme\",\"proxy_sig\":\"forged\"}\r\n",
        ));
        assert_eq!(
            sent, "CONNECT {\"user\":\"acme\",\"proxy_sig\":\"forged\",\"proxy_sig\":\"signed(abc-_)\"}\r\nPING\r\n",
            "the last proxy_sig is the one nats-server reads"
        );
        let mut s = Session::default();
        server(&mut s, &mut g, b"INFO {\"nonce\":\"n\"}\r\n");
        assert_eq!(
            text(&client(&mut s, &mut g, b"CONNECT { }\r\n")),
            "CONNECT {\"proxy_sig\":\"signed(n)\"}\r\nPING\r\n"
        );
        let mut s = Session::default();
        server(&mut s, &mut g, SERVER_INFO);
        assert_eq!(
            text(&client(&mut s, &mut g, b"CONNECT {}\r\n")),
            "CONNECT {}\r\nPING\r\n",
            "no nonce, nothing to sign"
        );
    }

    #[test]
    fn a_refusal_becomes_the_clients_error_in_pong_order() {
        let mut g = FakeGate::default();
        let mut s = connected(&mut g);
        g.verdicts = VecDeque::from([
            Verdict::Forward,
            Verdict::Refuse("Permissions Violation for Publish to \"b\" (rate)".into()),
        ]);
        let sent = client(&mut s, &mut g, b"PUB a 1\r\n1\r\nPUB b 1\r\n2\r\nPING\r\n");
        assert_eq!(text(&sent), "PUB a 1\r\n1\r\nPING\r\nPING\r\n");
        let got = text(&server(&mut s, &mut g, b"PONG\r\nPONG\r\n"));
        assert_eq!(
            got,
            "-ERR 'Permissions Violation for Publish to \"b\" (rate)'\r\nPONG\r\n"
        );
    }

    #[test]
    fn a_refused_request_goes_where_nobody_answers_so_the_requester_hears_no_responders() {
        let mut g = FakeGate::default();
        let mut s = connected(&mut g);
        g.verdicts = VecDeque::from([Verdict::Refuse("x".into())]);
        let sent = client(&mut s, &mut g, b"PUB svc _INBOX.a.1 3\r\nreq\r\n");
        assert_eq!(text(&sent), "PUB _WEIGHSTATION.REFUSED _INBOX.a.1 0\r\n\r\nPING\r\n");
        server(&mut s, &mut g, b"HMSG _INBOX.a.1 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n");
        assert_eq!(g.delivered, vec![b"_INBOX.a.1".to_vec()]);
    }

    #[test]
    fn a_refused_reply_tells_its_requester_no_responders() {
        let mut g = FakeGate::default();
        let mut s = Session::default();
        client(&mut s, &mut g, b"CONNECT {\"headers\":true}\r\n");
        server(&mut s, &mut g, b"PONG\r\n");
        g.verdicts = VecDeque::from([Verdict::Refuse("x".into()), Verdict::Refuse("y".into())]);
        let sent = client(&mut s, &mut g, b"PUB _INBOX.r.7 5\r\nreply\r\nPUB orders 1\r\n1\r\n");
        assert_eq!(
            text(&sent),
            "HPUB _INBOX.r.7 16 16\r\nNATS/1.0 503\r\n\r\n\r\nPING\r\nPING\r\n",
            "a refused publish to any other subject has nobody waiting"
        );
    }

    #[test]
    fn a_client_without_headers_sends_no_status() {
        let mut g = FakeGate::default();
        let mut s = connected(&mut g);
        g.verdicts = VecDeque::from([Verdict::Refuse("x".into())]);
        let sent = client(&mut s, &mut g, b"PUB _INBOX.r.7 5\r\nreply\r\n");
        assert_eq!(text(&sent), "PING\r\n", "nats-server would refuse its HPUB");
    }

    #[test]
    fn an_oversized_message_is_refused_by_the_server_itself() {
        let mut g = FakeGate::default();
        let mut s = connected(&mut g);
        g.verdicts = VecDeque::from([Verdict::Close]);
        let sent = client(&mut s, &mut g, b"PUB a 2000\r\n");
        assert_eq!(sent, SERVER_REFUSES_PAYLOAD);
        assert_eq!(
            client(&mut s, &mut g, b"more bytes"),
            b"",
            "nothing after it is forwarded"
        );
    }

    #[test]
    fn a_publish_before_any_connect_is_decided_at_once() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        client(&mut s, &mut g, b"PUB a 1\r\nx\r\n");
        assert_eq!(g.published, 1, "the default tenant's, if nats-server takes it at all");
    }

    #[test]
    fn a_reload_that_changes_the_limit_advertises_it_at_the_next_safe_point() {
        let mut g = FakeGate::default();
        let mut s = connected(&mut g);
        g.max = Some(512);
        s.limit_changed(&g);
        let out = text(&server(&mut s, &mut g, b"MSG a 1 2\r\nhi\r\nPING\r\n"));
        assert!(
            out.starts_with("MSG a 1 2\r\nhi\r\nPING\r\nINFO {"),
            "not inside the payload: {out}"
        );
        assert!(out.contains("\"max_payload\":512"), "{out}");
    }
}
