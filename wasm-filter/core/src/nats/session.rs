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
//! - A connection over the tenant's connection limit gets `-ERR 'maximum connections exceeded …'`
//!   in place of its handshake PONG; nats-server then closes it.

use std::collections::VecDeque;

use super::server::{ServerEdit, ServerHandler, ServerOp, ServerStream};
use super::stream::{ClientHandler, ClientStream, Publish};
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
    /// The client's CONNECT: attribute it; Err(text) refuses the connection.
    fn connect(&mut self, user: Option<&str>) -> Result<(), String>;
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
    ConnectionRefused(String),
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
    /// The limit changed on a live connection: send an INFO at the next safe point.
    info_now: bool,
    server_info: Option<Vec<u8>>,
    advertised: Option<u64>,
    /// The client's CONNECT declared headers: it may publish HPUB.
    headers: bool,
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
        let connect = super::parse_connect(json);
        self.state.headers = connect.headers;
        match self.gate.connect(connect.user.as_deref()) {
            Ok(()) => {
                self.state.info_after_pong = true;
                Admission::Forward
            }
            Err(text) => {
                self.state.pongs.push_back(PongOwner::ConnectionRefused(text));
                let mut with = b"CONNECT ".to_vec();
                with.extend_from_slice(json);
                with.extend_from_slice(b"\r\nPING\r\n");
                with.extend_from_slice(SERVER_REFUSES_PAYLOAD);
                Admission::Close(with)
            }
        }
    }

    fn ping(&mut self) {
        self.state.pongs.push_back(PongOwner::Client);
    }

    fn publish(&mut self, p: &Publish<'_>) -> Admission {
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
}

impl<G: Gate> ServerHandler for ServerSide<'_, G> {
    fn op(&mut self, op: &ServerOp<'_>) -> ServerEdit {
        let edit = match op {
            ServerOp::Info { json } => {
                self.state.server_info = Some(json.to_vec());
                self.state.info_now = false;
                match self.tenant_info() {
                    Some(line) => ServerEdit::Replace(line),
                    None => ServerEdit::Keep,
                }
            }
            ServerOp::Msg { subject } => {
                self.gate.delivered(subject);
                return ServerEdit::Keep; // never insert inside a payload
            }
            ServerOp::Pong => match self.state.pongs.pop_front() {
                Some(PongOwner::Refusal(text)) => return ServerEdit::Replace(err_line(&text)),
                Some(PongOwner::ConnectionRefused(text)) => return ServerEdit::ReplaceThenEnd(err_line(&text)),
                Some(PongOwner::Client) | None => {
                    if std::mem::take(&mut self.state.info_after_pong) {
                        if let Some(line) = self.tenant_info() {
                            return ServerEdit::KeepThenInsert(line);
                        }
                    }
                    ServerEdit::Keep
                }
            },
            ServerOp::Ping | ServerOp::Other => ServerEdit::Keep,
        };
        if edit == ServerEdit::Keep && std::mem::take(&mut self.state.info_now) {
            if let Some(line) = self.tenant_info() {
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
        users: Vec<Option<String>>,
        refuse_connection: bool,
        verdicts: VecDeque<Verdict>,
        delivered: Vec<Vec<u8>>,
        max: Option<u64>,
    }

    impl Gate for FakeGate {
        fn connect(&mut self, user: Option<&str>) -> Result<(), String> {
            self.users.push(user.map(str::to_owned));
            if self.refuse_connection {
                return Err("maximum connections exceeded (connections limit of tenant acme: 1)".into());
            }
            self.max = Some(1024);
            Ok(())
        }
        fn publish(&mut self, _: &Publish<'_>) -> Verdict {
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

    #[test]
    fn the_tenant_info_follows_the_handshake_pong() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        assert_eq!(
            server(&mut s, &mut g, SERVER_INFO),
            SERVER_INFO,
            "before CONNECT the tenant is unknown"
        );
        client(&mut s, &mut g, b"CONNECT {\"user\":\"acme\"}\r\nPING\r\n");
        assert_eq!(g.users, vec![Some("acme".to_string())]);
        let out = text(&server(&mut s, &mut g, b"PONG\r\n"));
        assert!(out.starts_with("PONG\r\nINFO {"), "{out}");
        assert!(
            out.contains("\"max_payload\":1024") && out.contains("\"headers\":true"),
            "{out}"
        );
        assert_eq!(server(&mut s, &mut g, b"PONG\r\n"), b"PONG\r\n", "only once");
    }

    #[test]
    fn a_refusal_becomes_the_clients_error_in_pong_order() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        server(&mut s, &mut g, SERVER_INFO);
        client(&mut s, &mut g, b"CONNECT {}\r\nPING\r\n");
        server(&mut s, &mut g, b"PONG\r\n");
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
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        g.verdicts = VecDeque::from([Verdict::Refuse("x".into())]);
        let sent = client(&mut s, &mut g, b"PUB svc _INBOX.a.1 3\r\nreq\r\n");
        assert_eq!(text(&sent), "PUB _WEIGHSTATION.REFUSED _INBOX.a.1 0\r\n\r\nPING\r\n");
        server(&mut s, &mut g, b"HMSG _INBOX.a.1 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n");
        assert_eq!(g.delivered, vec![b"_INBOX.a.1".to_vec()]);
    }

    #[test]
    fn a_refused_reply_tells_its_requester_no_responders() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        client(&mut s, &mut g, b"CONNECT {\"headers\":true}\r\n");
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
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        client(&mut s, &mut g, b"CONNECT {\"user\":\"a\"}\r\n");
        g.verdicts = VecDeque::from([Verdict::Refuse("x".into())]);
        let sent = client(&mut s, &mut g, b"PUB _INBOX.r.7 5\r\nreply\r\n");
        assert_eq!(text(&sent), "PING\r\n", "nats-server would refuse its HPUB");
    }

    #[test]
    fn an_oversized_message_is_refused_by_the_server_itself() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
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
    fn a_connection_over_the_limit_hears_why_in_place_of_its_pong() {
        let (mut s, mut g) = (
            Session::default(),
            FakeGate {
                refuse_connection: true,
                ..FakeGate::default()
            },
        );
        let sent = text(&client(&mut s, &mut g, b"CONNECT {\"user\":\"acme\"}\r\nPING\r\n"));
        assert_eq!(
            sent,
            format!(
                "CONNECT {{\"user\":\"acme\"}}\r\nPING\r\n{}",
                text(SERVER_REFUSES_PAYLOAD)
            )
        );
        let got = text(&server(&mut s, &mut g, b"PONG\r\n-ERR 'Maximum Payload Violation'\r\n"));
        assert_eq!(
            got,
            "-ERR 'maximum connections exceeded (connections limit of tenant acme: 1)'\r\n"
        );
    }

    #[test]
    fn a_reload_that_changes_the_limit_advertises_it_at_the_next_safe_point() {
        let (mut s, mut g) = (Session::default(), FakeGate::default());
        server(&mut s, &mut g, SERVER_INFO);
        client(&mut s, &mut g, b"CONNECT {}\r\nPING\r\n");
        server(&mut s, &mut g, b"PONG\r\n");
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
