//! Cluster-shaped INFOs (any bytes as the JSON, seeded with INFOs captured from a 3-server
//! cluster), sent by the server before and after the client's CONNECT, split anywhere: the
//! session never panics, and every INFO it forwards names only the gateway (its listener's host
//! and port, its connect_urls, no ip, no ws_connect_urls), or the connection ends with nothing
//! more forwarded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::rc::Rc;
use weighstation_core::identity::NatsCredentials;
use weighstation_core::nats::{Delivered, Gate, Listener, Publish, Session, Verdict};
use weighstation_core::source::Ranges;

struct Accepting;

impl Gate for Accepting {
    fn authenticated(&mut self, _: NatsCredentials) -> Result<(), String> {
        Ok(())
    }
    fn authentication_failed(&mut self) {}
    fn proxy_signature(&self, _: &str) -> Option<String> {
        None
    }
    fn publish(&mut self, _: &Publish<'_>) -> Verdict {
        Verdict::Forward
    }
    fn subscribe(&mut self, _: &[u8]) -> Verdict {
        Verdict::Forward
    }
    fn delivered(&mut self, _: &Delivered<'_>) -> bool {
        true
    }
    fn max_payload(&self) -> Option<u64> {
        Some(1024)
    }
}

const HOST: &str = "gw.example";
const URLS: [&str; 2] = ["gw.example:4222", "gw-1.example:4222"];

/// Every INFO line in what was forwarded names only the gateway.
fn check(forwarded: &[u8]) {
    for line in forwarded.split(|&b| b == b'\n') {
        let Some(json) = line.strip_prefix(b"INFO ") else {
            continue;
        };
        let info: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(json.strip_suffix(b"\r").unwrap_or(json))
                .expect("a forwarded INFO is a JSON object");
        assert_eq!(info.get("host").and_then(|h| h.as_str()), Some(HOST), "{info:?}");
        assert_eq!(info.get("port").and_then(|p| p.as_u64()), Some(4222), "{info:?}");
        let urls: Vec<&str> = info["connect_urls"]
            .as_array()
            .expect("connect_urls")
            .iter()
            .filter_map(|u| u.as_str())
            .collect();
        assert_eq!(urls, URLS, "{info:?}");
        for field in ["ip", "ws_connect_urls"] {
            assert!(!info.contains_key(field), "{field}: {info:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, json)) = data.split_first() else {
        return;
    };
    // One INFO line: its JSON holds no line end.
    let json: Vec<u8> = json.iter().copied().filter(|&b| b != b'\n').collect();
    let info = [b"INFO ", json.as_slice(), b"\r\n"].concat();
    let mut session = Session::default();
    let listener = Listener {
        address: Some((HOST.into(), 4222)),
        connect_urls: URLS.iter().map(|u| u.to_string()).collect(),
    };
    session.client_reached(Some(Rc::new(listener)), Some("192.0.2.1".into()));
    let before = [info.as_slice(), b"PING\r\n"].concat();
    let after = [b"PONG\r\nPONG\r\n".as_slice(), &info, b"PING\r\n", &info].concat();
    let mut forwarded = Vec::new();
    let server = |session: &mut Session, bytes: &[u8], forwarded: &mut Vec<u8>| {
        let at = usize::from(split).min(bytes.len());
        for chunk in [&bytes[..at], &bytes[at..]] {
            match session.server_data(&mut Ranges::new(chunk), &mut Accepting) {
                Some(r) => forwarded.extend(r),
                None => forwarded.extend_from_slice(chunk),
            }
        }
    };
    server(&mut session, &before, &mut forwarded);
    session.client_data(&mut Ranges::new(b"CONNECT {}\r\nPING\r\n"), &mut Accepting);
    server(&mut session, &after, &mut forwarded);
    check(&forwarded);
    if session.unreadable_info().is_some() {
        assert!(
            !forwarded.windows(5).any(|w| w == b"INFO "),
            "an unreadable INFO ends the connection before any INFO is forwarded"
        );
    }
});
