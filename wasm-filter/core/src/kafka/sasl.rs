//! Kafka SASL as the filter reads it to learn who a connection authenticated as: the mechanism
//! from SaslHandshake, the principal from the client's SaslAuthenticate, and the broker's
//! verdict from its SaslAuthenticate response. Nothing is verified here — the broker does that,
//! and the identity counts only once it said error_code 0 (see crate::identity).

use super::cursor::Cursor;
use crate::identity::KafkaPrincipal;
use crate::jwt;

pub const API_SASL_HANDSHAKE: i16 = 17;
pub const API_SASL_AUTHENTICATE: i16 = 36;
/// SaslAuthenticate is flexible (compact encodings, tagged fields) from v2.
const FIRST_FLEXIBLE_AUTHENTICATE: i16 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mechanism {
    /// No SaslHandshake seen: Kafka's SaslAuthenticate always follows one.
    #[default]
    Unknown,
    Plain,
    /// SCRAM-SHA-256 and SCRAM-SHA-512 (the username is read the same way).
    Scram,
    OAuthBearer,
    /// A mechanism the filter does not read (GSSAPI, …): its connections stay unattributed.
    Other,
}

/// The mechanism a SaslHandshake request names (v0 and v1: one STRING).
pub fn handshake_mechanism(body: &[u8]) -> Mechanism {
    match Cursor::new(body).nullable_string() {
        Some(Some(b"PLAIN")) => Mechanism::Plain,
        Some(Some(b"SCRAM-SHA-256" | b"SCRAM-SHA-512")) => Mechanism::Scram,
        Some(Some(b"OAUTHBEARER")) => Mechanism::OAuthBearer,
        _ => Mechanism::Other,
    }
}

/// What one client SaslAuthenticate says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Who the client claims to be; the broker's answer to this request decides (SCRAM: its
    /// answer to the client-final message that follows).
    Claims(KafkaPrincipal),
    /// SCRAM's client-final message: its answer completes the exchange.
    ScramFinal,
    /// Nothing the filter reads.
    Other,
}

/// Reads a SaslAuthenticate request body.
pub fn authenticate_step(body: &[u8], api_version: i16, mechanism: Mechanism) -> Step {
    let mut c = Cursor::new(body);
    let auth = if api_version >= FIRST_FLEXIBLE_AUTHENTICATE {
        c.compact_nullable()
    } else {
        c.nullable_bytes()
    };
    let Some(Some(auth)) = auth else {
        return Step::Other;
    };
    let principal = match mechanism {
        Mechanism::Plain => plain_user(auth),
        Mechanism::Scram if auth.starts_with(b"c=") => return Step::ScramFinal,
        Mechanism::Scram => scram_user(auth),
        Mechanism::OAuthBearer => oauth_principal(auth),
        Mechanism::Unknown | Mechanism::Other => None,
    };
    principal.map_or(Step::Other, Step::Claims)
}

fn text(b: &[u8]) -> Option<String> {
    String::from_utf8(b.to_vec()).ok().filter(|s| !s.is_empty())
}

/// PLAIN (RFC 4616): "[authzid] NUL authcid NUL password".
fn plain_user(auth: &[u8]) -> Option<KafkaPrincipal> {
    let mut parts = auth.split(|&b| b == 0);
    let (_authzid, user, _password) = (parts.next()?, parts.next()?, parts.next()?);
    Some(KafkaPrincipal {
        name: text(user)?,
        claims: Vec::new(),
    })
}

/// SCRAM client-first message (RFC 5802): "n,[a=authzid],n=username,r=nonce[,…]", with ','
/// and '=' in the username escaped as "=2C" and "=3D".
fn scram_user(auth: &[u8]) -> Option<KafkaPrincipal> {
    let bare = std::str::from_utf8(auth).ok()?.splitn(3, ',').nth(2)?;
    let user = bare.split(',').find_map(|a| a.strip_prefix("n="))?;
    Some(KafkaPrincipal {
        name: user.replace("=2C", ",").replace("=3D", "="),
        claims: Vec::new(),
    })
}

/// OAUTHBEARER initial response (RFC 7628): "n,[a=authzid],\x01auth=Bearer <token>\x01…\x01\x01".
/// The principal is the token's `sub`; its string claims are kept for policies that match
/// another claim.
fn oauth_principal(auth: &[u8]) -> Option<KafkaPrincipal> {
    let token = auth
        .split(|&b| b == 0x01)
        .find_map(|kv| kv.strip_prefix(b"auth="))?
        .strip_prefix(b"Bearer ")?;
    let claims = jwt::string_claims(&jwt::claims(token)?);
    let name = claims
        .iter()
        .find(|(k, _)| k == "sub")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    Some(KafkaPrincipal { name, claims })
}

/// The broker's SaslAuthenticate response: did this step succeed, and is authentication over?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub error_code: i16,
    /// The server's message was empty: nothing more is asked of the client. An OAUTHBEARER
    /// token the broker refuses is answered with error_code 0 and a JSON error message, and
    /// the failure follows; only an empty answer means success.
    pub final_message: bool,
}

impl Answer {
    pub fn accepted(&self) -> bool {
        self.error_code == 0
    }
}

/// Reads a whole SaslAuthenticate response frame (size prefix included).
pub fn authenticate_answer(frame: &[u8], api_version: i16) -> Option<Answer> {
    let mut c = Cursor::new(frame);
    let (_size, _correlation) = (c.i32()?, c.i32()?);
    let flexible = api_version >= FIRST_FLEXIBLE_AUTHENTICATE;
    if flexible {
        c.skip_tagged_fields()?;
    }
    let error_code = c.i16()?;
    c.string_field(flexible)?;
    let auth = if flexible {
        c.compact_nullable()?
    } else {
        c.nullable_bytes()?
    };
    Some(Answer {
        error_code,
        final_message: auth.is_none_or(<[u8]>::is_empty),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v0(auth: &[u8]) -> Vec<u8> {
        let mut b = (auth.len() as i32).to_be_bytes().to_vec();
        b.extend_from_slice(auth);
        b
    }

    fn v2(auth: &[u8]) -> Vec<u8> {
        let mut b = vec![auth.len() as u8 + 1];
        b.extend_from_slice(auth);
        b.push(0); // tagged fields
        b
    }

    fn name(step: Step) -> Option<String> {
        match step {
            Step::Claims(p) => Some(p.name),
            _ => None,
        }
    }

    #[test]
    fn reads_the_mechanism_of_a_handshake() {
        let req = |m: &str| {
            let mut b = (m.len() as i16).to_be_bytes().to_vec();
            b.extend_from_slice(m.as_bytes());
            b
        };
        assert_eq!(handshake_mechanism(&req("PLAIN")), Mechanism::Plain);
        assert_eq!(handshake_mechanism(&req("SCRAM-SHA-512")), Mechanism::Scram);
        assert_eq!(handshake_mechanism(&req("SCRAM-SHA-256")), Mechanism::Scram);
        assert_eq!(handshake_mechanism(&req("OAUTHBEARER")), Mechanism::OAuthBearer);
        assert_eq!(handshake_mechanism(&req("GSSAPI")), Mechanism::Other);
        assert_eq!(handshake_mechanism(b"\0"), Mechanism::Other);
    }

    #[test]
    fn reads_the_principal_of_each_mechanism() {
        let token = format!(
            "e30.{}.",
            jwt::base64url_encode(br#"{"sub":"billing","azp":"acme-app","exp":1}"#)
        );
        let oauth = format!("n,,\x01auth=Bearer {token}\x01\x01");
        let cases: Vec<(&str, Vec<u8>, i16, Mechanism, Option<&str>)> = vec![
            (
                "PLAIN v0",
                v0(b"\0acme-svc\0secret"),
                0,
                Mechanism::Plain,
                Some("acme-svc"),
            ),
            (
                "PLAIN v2",
                v2(b"authz\0acme-svc\0secret"),
                2,
                Mechanism::Plain,
                Some("acme-svc"),
            ),
            ("PLAIN without a user", v0(b"\0\0secret"), 0, Mechanism::Plain, None),
            ("PLAIN without separators", v0(b"abc"), 0, Mechanism::Plain, None),
            (
                "SCRAM client-first",
                v2(b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL"),
                2,
                Mechanism::Scram,
                Some("alice"),
            ),
            (
                "SCRAM escaped user",
                v0(b"n,a=x,n=a=2Cb=3Dc,r=abc"),
                0,
                Mechanism::Scram,
                Some("a,b=c"),
            ),
            ("SCRAM garbage", v0(b"hello"), 0, Mechanism::Scram, None),
            (
                "OAUTHBEARER",
                v2(oauth.as_bytes()),
                2,
                Mechanism::OAuthBearer,
                Some("billing"),
            ),
            (
                "OAUTHBEARER not a JWT",
                v0(b"n,,\x01auth=Bearer abc\x01\x01"),
                0,
                Mechanism::OAuthBearer,
                None,
            ),
            (
                "no handshake seen",
                v0(b"\0acme-svc\0secret"),
                0,
                Mechanism::Unknown,
                None,
            ),
            ("truncated", b"\0\0\0\x09ab".to_vec(), 0, Mechanism::Plain, None),
        ];
        for (case, body, version, mechanism, want) in cases {
            assert_eq!(
                name(authenticate_step(&body, version, mechanism)).as_deref(),
                want,
                "{case}"
            );
        }
        assert_eq!(
            authenticate_step(&v0(b"c=biws,r=abc,p=xyz"), 0, Mechanism::Scram),
            Step::ScramFinal
        );
        let Step::Claims(p) = authenticate_step(&v0(oauth.as_bytes()), 0, Mechanism::OAuthBearer) else {
            panic!("claims");
        };
        assert!(p.claims.contains(&("azp".into(), "acme-app".into())), "{:?}", p.claims);
    }

    /// A SaslAuthenticate response frame: size, correlation id, then the body.
    fn answer(version: i16, error: i16, message: Option<&[u8]>, auth: &[u8]) -> Vec<u8> {
        let mut b = 7i32.to_be_bytes().to_vec();
        if version >= 2 {
            b.push(0);
        }
        b.extend_from_slice(&error.to_be_bytes());
        match (version >= 2, message) {
            (true, None) => b.push(0),
            (true, Some(m)) => {
                b.push(m.len() as u8 + 1);
                b.extend_from_slice(m);
            }
            (false, None) => b.extend_from_slice(&(-1i16).to_be_bytes()),
            (false, Some(m)) => {
                b.extend_from_slice(&(m.len() as i16).to_be_bytes());
                b.extend_from_slice(m);
            }
        }
        b.extend_from_slice(&if version >= 2 { v2(auth) } else { v0(auth) });
        if version >= 1 {
            b.extend_from_slice(&0i64.to_be_bytes());
        }
        let mut frame = ((b.len() + 4) as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&b);
        frame
    }

    #[test]
    fn reads_the_brokers_verdict() {
        let ok = authenticate_answer(&answer(2, 0, None, b""), 2).unwrap();
        assert!(ok.accepted() && ok.final_message);
        let failed = authenticate_answer(&answer(1, 58, Some(b"Authentication failed"), b""), 1).unwrap();
        assert!(!failed.accepted());
        assert_eq!(failed.error_code, 58);
        let challenge = authenticate_answer(&answer(0, 0, None, br#"{"status":"invalid_token"}"#), 0).unwrap();
        assert!(
            challenge.accepted() && !challenge.final_message,
            "an OAUTHBEARER refusal starts this way"
        );
        let scram_first = authenticate_answer(&answer(2, 0, None, b"r=abc,s=c2FsdA==,i=4096"), 2).unwrap();
        assert!(!scram_first.final_message);
        assert_eq!(authenticate_answer(b"\0\0\0\x04\0\0\0\x07", 1), None, "truncated");
    }
}
