//! The claims of a JSON Web Token, read without verifying its signature: the broker verifies
//! (nats-server a NATS user JWT, Kafka an OAUTHBEARER token) and the filter attributes only
//! after the broker accepted it. Used once per connection, never on the data path.

use serde_json::{Map, Value};

/// The token's payload (its second dot-separated part, base64url without padding) as a JSON
/// object; None if it is not one.
pub fn claims(token: &[u8]) -> Option<Map<String, Value>> {
    let mut parts = token.split(|&b| b == b'.');
    let (_header, payload) = (parts.next()?, parts.next()?);
    let json = base64url_decode(payload)?;
    match serde_json::from_slice(&json).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The top-level claims whose value is a string, as (name, value): what a policy can match.
pub fn string_claims(claims: &Map<String, Value>) -> Vec<(String, String)> {
    claims
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

/// base64url (RFC 4648 §5), padding optional.
pub fn base64url_decode(text: &[u8]) -> Option<Vec<u8>> {
    let text = text
        .strip_suffix(b"==")
        .or_else(|| text.strip_suffix(b"="))
        .unwrap_or(text);
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in text {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    // Left-over bits must be padding zeros of fewer than 6 bits.
    (bits < 6 && acc & ((1 << bits) - 1) == 0).then_some(out)
}

/// base64url without padding, as NATS signatures are sent.
pub fn base64url_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |a, &b| (a << 8) | u32::from(b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_the_payload_of_an_unsigned_token() {
        // {"alg":"none"} . {"sub":"alice","scope":"write","n":1} . (no signature)
        let token = b"eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsInNjb3BlIjoid3JpdGUiLCJuIjoxfQ.";
        let c = claims(token).expect("claims");
        assert_eq!(c["sub"], "alice");
        let mut s = string_claims(&c);
        s.sort();
        assert_eq!(
            s,
            vec![("scope".into(), "write".into()), ("sub".into(), "alice".into())],
            "non-string claims are not matchable"
        );
    }

    #[test]
    fn a_token_that_is_not_a_jwt_has_no_claims() {
        for bad in [&b""[..], b"abc", b"a.%%%.c", b"a.WzFd.c" /* [1] */] {
            assert_eq!(claims(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    proptest! {
        #[test]
        fn base64url_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(base64url_decode(base64url_encode(&bytes).as_bytes()), Some(bytes));
        }
    }
}
