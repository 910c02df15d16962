use super::*;
use proptest::prelude::*;

/// INFOs captured from a 3-server nats-server 2.12 cluster (servers on 127.0.0.1:25220-25222):
/// each server's first INFO, the one after CONNECT, the one a joining server caused, and a
/// lame-duck server's.
const CAPTURED: &str = include_str!("testdata/cluster-infos.txt");
const SERVERS: [&str; 3] = ["127.0.0.1:25220", "127.0.0.1:25221", "127.0.0.1:25222"];

fn gateway() -> Listener {
    Listener {
        address: Some(("gw.example".into(), 4222)),
        connect_urls: vec!["gw-0.example:4222".into(), "gw-1.example:4222".into()],
    }
}

fn json_of(line: &[u8]) -> Map<String, Value> {
    let body = line.strip_prefix(b"INFO ").expect("INFO prefix");
    let body = body.strip_suffix(b"\r\n").expect("CRLF");
    serde_json::from_slice(body).expect("JSON object")
}

fn captured() -> impl Iterator<Item = &'static [u8]> {
    CAPTURED
        .lines()
        .map(|l| l.strip_prefix("INFO ").expect("a captured INFO line").trim().as_bytes())
}

#[test]
fn captured_cluster_infos_name_only_the_gateway() {
    let listener = gateway();
    let view = ClientView {
        listener: Some(&listener),
        client_ip: Some("10.1.2.3"),
        ..ClientView::default()
    };
    let mut ldm = 0;
    for json in captured() {
        let server: Map<String, Value> = serde_json::from_slice(json).unwrap();
        let line = rewrite(json, &view).unwrap();
        let text = String::from_utf8(line.clone()).unwrap();
        for s in SERVERS {
            let port = s.rsplit_once(':').unwrap().1;
            assert!(!text.contains(s) && !text.contains(port), "{s} leaked: {text}");
        }
        let info = json_of(&line);
        assert_eq!(info["host"], "gw.example");
        assert_eq!(info["port"], 4222);
        assert_eq!(
            info["connect_urls"],
            serde_json::json!(["gw-0.example:4222", "gw-1.example:4222"])
        );
        assert_eq!(info["client_ip"], "10.1.2.3");
        assert!(!info.contains_key("ip"));
        // Everything that says no address is kept as the server sent it.
        for (k, v) in &server {
            if !SERVER_ADDRESS_FIELDS.contains(&k.as_str()) {
                assert_eq!(&info[k], v, "{k}");
            }
        }
        ldm += usize::from(info.get("ldm") == Some(&Value::Bool(true)));
    }
    assert_eq!(ldm, 1, "the lame-duck INFO keeps ldm");
}

#[test]
fn without_advertised_addresses_the_server_addresses_are_removed() {
    let json = captured().next().unwrap();
    let listener = Listener::default();
    for listener in [None, Some(&listener)] {
        let view = ClientView {
            listener,
            ..ClientView::default()
        };
        let info = json_of(&rewrite(json, &view).unwrap());
        for field in SERVER_ADDRESS_FIELDS {
            assert!(!info.contains_key(field), "{field} kept");
        }
        assert_eq!(info["server_name"], "nats-0");
    }
}

#[test]
fn websocket_urls_are_removed() {
    let json = br#"{"server_id":"N","ws_connect_urls":["10.0.0.5:8080"],"connect_urls":["10.0.0.5:4222"]}"#;
    let listener = gateway();
    let view = ClientView {
        listener: Some(&listener),
        ..ClientView::default()
    };
    let text = String::from_utf8(rewrite(json, &view).unwrap()).unwrap();
    assert!(
        !text.contains("10.0.0.5") && !text.contains("ws_connect_urls"),
        "{text}"
    );
}

#[test]
fn max_payload_and_tls_say_what_the_client_gets() {
    let json = br#"{"max_payload":1048576,"tls_required":true,"tls_available":true}"#;
    let cases = [
        (Some(1024), false, 1024, false),
        (Some(1 << 30), true, 1048576, true),
        (None, false, 1048576, false),
    ];
    for (max, tls, want_max, want_tls) in cases {
        let view = ClientView {
            max_payload: max,
            tls,
            ..ClientView::default()
        };
        let info = json_of(&rewrite(json, &view).unwrap());
        assert_eq!(info["max_payload"], want_max, "{max:?}");
        assert_eq!(info["tls_required"], want_tls, "{max:?}");
        assert_eq!(info.contains_key("tls_available"), tls, "{max:?}");
    }
}

#[test]
fn what_is_not_a_json_object_is_unreadable() {
    let view = ClientView::default();
    for json in [
        &b""[..],
        b"{",
        b"[\"127.0.0.1:4222\"]",
        b"\"x\"",
        b"{\"a\":1} trailing",
        b"null",
    ] {
        assert_eq!(rewrite(json, &view), Err(Unreadable::NotAnObject), "{json:?}");
    }
}

#[test]
fn duplicate_and_oddly_typed_address_fields_are_replaced() {
    let json = br#"{"connect_urls":"10.0.0.9:4222","connect_urls":[1,{"x":"10.0.0.9:4222"}],"host":["10.0.0.9"],"port":"4222","ip":"nats://10.0.0.9:4222/"}"#;
    let listener = gateway();
    let view = ClientView {
        listener: Some(&listener),
        ..ClientView::default()
    };
    let text = String::from_utf8(rewrite(json, &view).unwrap()).unwrap();
    assert!(!text.contains("10.0.0.9"), "{text}");
}

/// An upstream address: an IPv4 or a host name, with a port.
fn upstream() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            (1u8..=254, 0u8..=255, 0u8..=255, 1u8..=254).prop_map(|(a, b, c, d)| format!("{a}.{b}.{c}.{d}")),
            "[a-z]{3,8}\\.nats-[0-9]\\.svc".prop_map(String::from),
        ],
        10_000u16..60_000,
    )
        .prop_map(|(h, p)| format!("{h}:{p}"))
}

/// A cluster-shaped INFO: the servers' addresses in every field that carries one (in odd shapes
/// too), beside fields that carry none.
fn cluster_info() -> impl Strategy<Value = (Vec<u8>, Vec<String>)> {
    (
        proptest::collection::vec(upstream(), 1..40),
        any::<bool>(),
        any::<u32>(),
        "[A-Z0-9]{8}",
    )
        .prop_map(|(servers, ldm, client_id, id)| {
            let (host, port) = servers[0].rsplit_once(':').unwrap();
            let info = serde_json::json!({
                "server_id": id,
                "host": host,
                "port": port.parse::<u16>().unwrap(),
                "ip": format!("nats://{}", servers[0]),
                "client_ip": host,
                "connect_urls": servers,
                "ws_connect_urls": servers.iter().map(|s| format!("ws://{s}")).collect::<Vec<_>>(),
                "ldm": ldm,
                "client_id": client_id,
                "max_payload": 1048576,
            });
            (serde_json::to_vec(&info).unwrap(), servers)
        })
}

proptest! {
    #[test]
    fn no_rewritten_info_holds_an_upstream_address((json, servers) in cluster_info(), advertised in any::<bool>()) {
        let listener = if advertised { gateway() } else { Listener::default() };
        let view = ClientView { listener: Some(&listener), ..ClientView::default() };
        let text = String::from_utf8(rewrite(&json, &view).unwrap()).unwrap();
        for s in &servers {
            let host = s.rsplit_once(':').unwrap().0;
            prop_assert!(!text.contains(host), "{} leaked: {}", host, text);
        }
    }

    #[test]
    fn arbitrary_bytes_are_rewritten_or_unreadable(json in proptest::collection::vec(any::<u8>(), 0..256)) {
        let listener = gateway();
        let view = ClientView { listener: Some(&listener), ..ClientView::default() };
        if let Ok(line) = rewrite(&json, &view) {
            let info = json_of(&line);
            prop_assert_eq!(&info["host"], "gw.example");
        }
    }
}
