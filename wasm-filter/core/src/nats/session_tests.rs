//! The NATS session's tests: handshake and verdict, refusals, INFO ordering.

use super::*;
use crate::source::Ranges;

#[derive(Default)]
pub(super) struct FakeGate {
    accepted: Vec<NatsCredentials>,
    failures: usize,
    refuse_connection: bool,
    /// The tenant has no size limit to advertise.
    unlimited: bool,
    signs: bool,
    pub(super) verdicts: VecDeque<Verdict>,
    pub(super) published: usize,
    delivered: Vec<(Vec<u8>, usize)>,
    /// Deliveries after this many are a slow consumer's.
    slow_after: Option<usize>,
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
    fn subscribe(&mut self, subject: &[u8]) -> Verdict {
        if subject.starts_with(b"forbidden.") {
            return Verdict::Refuse(format!(
                "Permissions Violation for Subscription to \"{}\"",
                String::from_utf8_lossy(subject)
            ));
        }
        Verdict::Forward
    }
    fn delivered(&mut self, d: &Delivered<'_>) -> bool {
        self.delivered.push((d.subject.to_vec(), d.bytes));
        self.slow_after.is_none_or(|n| self.delivered.len() <= n)
    }
    fn max_payload(&self) -> Option<u64> {
        self.max
    }
}

const SERVER_INFO: &[u8] = b"INFO {\"server_id\":\"S\",\"headers\":true,\"max_payload\":8388608}\r\n";

pub(super) fn client(s: &mut Session, g: &mut FakeGate, bytes: &[u8]) -> Vec<u8> {
    let o = s.client_data(&mut Ranges::new(bytes), g);
    assert!(!o.hold);
    o.replace.unwrap_or_else(|| bytes.to_vec())
}

pub(super) fn server(s: &mut Session, g: &mut FakeGate, bytes: &[u8]) -> Vec<u8> {
    s.server_data(&mut Ranges::new(bytes), g)
        .unwrap_or_else(|| bytes.to_vec())
}

pub(super) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The fields of an `INFO {...}\r\n` line.
fn info_fields(line: &[u8]) -> serde_json::Map<String, serde_json::Value> {
    let body = line.strip_prefix(b"INFO ").and_then(|b| b.strip_suffix(b"\r\n"));
    serde_json::from_slice(body.unwrap_or_default()).unwrap_or_default()
}

/// The server's INFO as a plaintext client is told it before its tenant is known.
fn plaintext_info(server_info: &[u8]) -> serde_json::Map<String, serde_json::Value> {
    let mut want = info_fields(server_info);
    want.insert("tls_required".into(), false.into());
    want.remove("tls_available");
    want
}

/// A session past its handshake, as nats.go does it.
pub(super) fn connected(g: &mut FakeGate) -> Session {
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
        info_fields(&server(&mut s, &mut g, SERVER_INFO)),
        plaintext_info(SERVER_INFO),
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
    let o = s.client_data(
        &mut Ranges::new(b"CONNECT {\"user\":\"acme\"}\r\nPUB a 1\r\nx\r\n"),
        &mut g,
    );
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
    let again = s.client_data(&mut Ranges::new(b"PUB a 1\r\nx\r\n"), &mut g);
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
        &mut Ranges::new(b"CONNECT {\"user\":\"globex\",\"pass\":\"wrong\"}\r\nPUB a 1\r\nx\r\n"),
        &mut g,
    );
    assert!(o.hold);
    let out = server(&mut s, &mut g, b"-ERR 'Authorization Violation'\r\n");
    assert_eq!(text(&out), "-ERR 'Authorization Violation'\r\n", "the client hears why");
    assert_eq!((g.failures, g.accepted.len()), (1, 0));
    assert!(s.release_held());
    s.forwarded(o.decided);
    let again = s.client_data(&mut Ranges::new(b"PUB a 1\r\nx\r\n"), &mut g);
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
    assert!(
        s.client_data(&mut Ranges::new(b"CONNECT {}\r\nPUB a 1\r\nx\r\n"), &mut g)
            .hold
    );
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
fn a_refused_subscription_is_answered_in_pong_order_and_the_next_one_goes_on() {
    let mut g = FakeGate::default();
    let mut s = connected(&mut g);
    let sent = client(&mut s, &mut g, b"SUB forbidden.x 1\r\nSUB allowed.x q 2\r\nPING\r\n");
    assert_eq!(text(&sent), "PING\r\nSUB allowed.x q 2\r\nPING\r\n");
    let got = text(&server(&mut s, &mut g, b"PONG\r\nPONG\r\n"));
    assert_eq!(
        got,
        "-ERR 'Permissions Violation for Subscription to \"forbidden.x\"'\r\nPONG\r\n"
    );
}

#[test]
fn a_subscription_waits_for_the_verdict_on_its_connect() {
    let mut g = FakeGate::default();
    let mut s = Session::default();
    server(&mut s, &mut g, SERVER_INFO);
    let o = s.client_data(
        &mut Ranges::new(b"CONNECT {\"user\":\"acme\"}\r\nSUB forbidden.x 1\r\n"),
        &mut g,
    );
    assert!(o.hold, "whose subscription it is waits for nats-server's verdict");
}

#[test]
fn a_refused_request_goes_where_nobody_answers_so_the_requester_hears_no_responders() {
    let mut g = FakeGate::default();
    let mut s = connected(&mut g);
    g.verdicts = VecDeque::from([Verdict::Refuse("x".into())]);
    let sent = client(&mut s, &mut g, b"PUB svc _INBOX.a.1 3\r\nreq\r\n");
    assert_eq!(text(&sent), "PUB _WEIGHSTATION.REFUSED _INBOX.a.1 0\r\n\r\nPING\r\n");
    server(&mut s, &mut g, b"HMSG _INBOX.a.1 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n");
    assert_eq!(g.delivered, vec![(b"_INBOX.a.1".to_vec(), 16)]);
}

#[test]
fn a_slow_consumer_gets_nothing_more_from_the_delivery_that_found_it_slow() {
    let mut g = FakeGate {
        slow_after: Some(1),
        ..FakeGate::default()
    };
    let mut s = connected(&mut g);
    let got = server(
        &mut s,
        &mut g,
        b"PING\r\nMSG a 1 2\r\nhi\r\nMSG b 1 3\r\nyou\r\nPING\r\n",
    );
    assert_eq!(text(&got), "PING\r\nMSG a 1 2\r\nhi\r\n");
    assert_eq!(g.delivered, vec![(b"a".to_vec(), 2), (b"b".to_vec(), 3)]);
    assert!(
        server(&mut s, &mut g, b"MSG c 1 1\r\nx\r\n").is_empty(),
        "the stream has ended"
    );
    assert_eq!(g.delivered.len(), 2);
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

/// Every INFO tells the client what its own connection is: a TLS-first client behind a plaintext
/// nats-server must read `tls_required` (nats.go refuses a server that offers no TLS), and a
/// plaintext client behind a TLS-only nats-server must not be asked to upgrade.
#[test]
fn info_says_what_the_clients_own_connection_is() {
    const TLS_SERVER_INFO: &[u8] =
        b"INFO {\"server_id\":\"S\",\"tls_required\":true,\"tls_available\":true,\"max_payload\":8388608}\r\n";
    let cases: [(bool, &[u8], Option<&str>); 4] = [
        (true, SERVER_INFO, Some("\"tls_required\":true")),
        (false, TLS_SERVER_INFO, Some("\"tls_required\":false")),
        (true, TLS_SERVER_INFO, None),
        (false, SERVER_INFO, None),
    ];
    for (client_tls, info, want) in cases {
        let mut g = FakeGate::default();
        let mut s = Session::default();
        s.client_tls(client_tls);
        let out = text(&server(&mut s, &mut g, info));
        match want {
            Some(want) => {
                assert!(out.contains(want), "client tls {client_tls}: {out}");
                assert!(!out.contains("tls_available"), "client tls {client_tls}: {out}");
            }
            None => {
                let mut want = info_fields(info);
                want.insert("tls_required".into(), client_tls.into());
                assert_eq!(
                    info_fields(out.as_bytes()),
                    want,
                    "nothing to change for client tls {client_tls}"
                );
            }
        }
        client(&mut s, &mut g, b"CONNECT {\"user\":\"acme\"}\r\nPING\r\n");
        let out = text(&server(&mut s, &mut g, b"PONG\r\nPONG\r\n"));
        assert!(
            out.contains("\"tls_required\":true") == client_tls && out.contains("\"max_payload\":1024"),
            "the tenant's INFO too, client tls {client_tls}: {out}"
        );
    }
}

/// A plaintext client on a TLS-first listener: its CONNECT (and the credentials in it) never
/// reaches nats-server; it reads why, and the connection ends.
#[test]
fn a_plaintext_client_on_a_tls_first_listener_is_told_to_handshake_first() {
    let (mut s, mut g) = (Session::default(), FakeGate::default());
    s.require_tls_first();
    server(&mut s, &mut g, SERVER_INFO);
    let sent = client(
        &mut s,
        &mut g,
        b"CONNECT {\"user\":\"acme\",\"pass\":\"s3cret\"}\r\nPING\r\n",
    );
    assert_eq!(
        text(&sent),
        "CONNECT {\"verbose\":false,\"pedantic\":false}\r\nPING\r\nPING\r\n",
        "nothing of the client's CONNECT goes upstream"
    );
    let out = text(&server(&mut s, &mut g, b"PONG\r\nPONG\r\n"));
    assert_eq!(
        out,
        format!("-ERR '{TLS_FIRST_REQUIRED}'\r\n"),
        "the error, and nothing after it"
    );
    assert!(
        g.accepted.is_empty() && g.failures == 0,
        "no one charged, no failure counted"
    );
    assert!(
        s.client_data(&mut Ranges::new(b"PUB a 1\r\nx\r\n"), &mut g)
            .replace
            .is_some(),
        "a PUB after it is not forwarded"
    );
    assert_eq!(g.published, 0);
}

/// The first INFO and every asynchronous one name the gateway's listener, never a server.
#[test]
fn every_info_names_the_gateway_not_the_servers() {
    const CLUSTER_INFO: &[u8] = b"INFO {\"server_id\":\"S\",\"host\":\"10.0.0.7\",\"port\":4222,\
\"connect_urls\":[\"10.0.0.7:4222\",\"10.0.0.8:4222\"],\"max_payload\":8388608}\r\n";
    const LAME_DUCK: &[u8] = b"INFO {\"server_id\":\"S\",\"host\":\"10.0.0.7\",\"port\":4222,\
\"connect_urls\":[\"10.0.0.8:4222\"],\"ldm\":true}\r\n";
    let listener = Rc::new(Listener {
        address: Some(("gateway.example".into(), 4222)),
        connect_urls: vec!["gateway.example:4222".into()],
    });
    let mut g = FakeGate::default();
    let mut s = Session::default();
    s.client_reached(Some(listener), Some("192.0.2.9".into()));
    let mut seen = text(&server(&mut s, &mut g, CLUSTER_INFO));
    client(&mut s, &mut g, b"CONNECT {\"user\":\"acme\"}\r\nPING\r\n");
    seen += &text(&server(&mut s, &mut g, b"PONG\r\nPONG\r\n"));
    let ldm = server(&mut s, &mut g, LAME_DUCK);
    seen += &text(&ldm);
    assert_eq!(seen.matches("INFO ").count(), 3, "{seen}");
    assert!(!seen.contains("10.0.0."), "a server address leaked: {seen}");
    let ldm = info_fields(&ldm);
    assert_eq!(ldm["ldm"], true);
    assert_eq!(ldm["host"], "gateway.example");
    assert_eq!(ldm["connect_urls"], serde_json::json!(["gateway.example:4222"]));
    assert_eq!(ldm["client_ip"], "192.0.2.9");
    assert!(s.unreadable_info().is_none());
}

/// An INFO the rewriter cannot read never reaches the client: nothing more is forwarded, and
/// the session says why the connection must end.
#[test]
fn an_unreadable_info_ends_the_connection() {
    let mut g = FakeGate::default();
    let mut s = connected(&mut g);
    let out = server(
        &mut s,
        &mut g,
        b"MSG a 1 2\r\nhi\r\nINFO {\"connect_urls\":[\"10.0.0.7:4222\"\r\nPING\r\n",
    );
    assert_eq!(text(&out), "MSG a 1 2\r\nhi\r\n");
    assert_eq!(s.unreadable_info(), Some(Unreadable::NotAnObject));
    assert!(
        server(&mut s, &mut g, b"PING\r\n").is_empty(),
        "nothing more is forwarded"
    );
}
