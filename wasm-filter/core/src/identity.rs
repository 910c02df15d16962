//! Who a connection is, as tenant attribution reads it, by how much each part can be trusted:
//!
//! - a client certificate Envoy verified at the TLS handshake (mTLS): trusted at once;
//! - credentials the broker accepted: the NATS CONNECT's user, nkey or user JWT once nats-server
//!   answered it with +OK or PONG, the Kafka SASL principal once the broker's SaslAuthenticate
//!   response carried error_code 0. Until then they are not part of the identity at all;
//! - the Kafka client.id: claimed, never verified; it attributes only a connection that
//!   authenticated in no way.

/// A client certificate Envoy verified.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerCertificate {
    /// The subject as Envoy renders it (RFC 2253), e.g. `CN=billing,O=acme`.
    pub subject: String,
    /// URI and DNS subject alternative names.
    pub sans: Vec<String>,
}

/// What a NATS client presented in its CONNECT.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NatsCredentials {
    pub user: Option<String>,
    /// The user's public nkey: the CONNECT's `nkey`, or the `sub` of its user JWT.
    pub nkey: Option<String>,
    /// The account public key of a user JWT: its `nats.issuer_account` (signed by an account
    /// signing key) or else its issuer.
    pub account: Option<String>,
    /// The CONNECT's `name`: not a credential, but what names the client within its tenant.
    pub name: Option<String>,
}

impl NatsCredentials {
    /// The credentials of a CONNECT with these fields; an unreadable JWT contributes nothing
    /// (nats-server will refuse it).
    pub fn new(user: Option<String>, nkey: Option<String>, jwt: Option<&str>) -> Self {
        let claims = jwt.and_then(|j| crate::jwt::claims(j.as_bytes()));
        let text = |v: Option<&serde_json::Value>| v.and_then(serde_json::Value::as_str).map(str::to_owned);
        let (jwt_user, account) = match &claims {
            Some(c) => (
                text(c.get("sub")),
                text(c.get("nats").and_then(|n| n.get("issuer_account"))).or_else(|| text(c.get("iss"))),
            ),
            None => (None, None),
        };
        NatsCredentials {
            user,
            nkey: nkey.or(jwt_user),
            account,
            name: None,
        }
    }
}

/// A Kafka SASL authentication the broker accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaPrincipal {
    /// PLAIN and SCRAM: the username; OAUTHBEARER: the token's `sub`.
    pub name: String,
    /// OAUTHBEARER: the token's string claims (a policy may match another claim than `sub`).
    pub claims: Vec<(String, String)>,
}

/// Credentials the broker accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authenticated {
    Nats(NatsCredentials),
    Kafka(KafkaPrincipal),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub certificate: Option<PeerCertificate>,
    pub authenticated: Option<Authenticated>,
    /// Kafka's client.id, as last seen.
    pub client_id: Option<String>,
}

impl Identity {
    /// True if a request with this client id would change what attribution reads: only a
    /// connection that authenticated in no way is attributed by its client id. Asked of every
    /// request, so it does not allocate.
    pub fn client_id_matters(&self, client_id: Option<&[u8]>) -> bool {
        self.certificate.is_none()
            && self.authenticated.is_none()
            && self.client_id.as_deref().map(str::as_bytes) != client_id
    }

    /// Names the client for an operator by what attribution reads, most trusted first; never a
    /// password or a token.
    pub fn label(&self) -> String {
        match (&self.authenticated, &self.certificate, &self.client_id) {
            (Some(Authenticated::Nats(c)), _, _) => match (&c.user, &c.nkey) {
                (Some(u), _) => format!("user {u}"),
                (None, Some(k)) => format!("nkey {k}"),
                // nats-server took it as its no_auth_user.
                (None, None) => "no credentials".to_owned(),
            },
            (Some(Authenticated::Kafka(p)), _, _) => format!("principal {}", p.name),
            (None, Some(c), _) => format!("certificate {}", c.subject),
            (None, None, Some(id)) => format!("client.id {id}"),
            (None, None, None) => "anonymous".to_owned(),
        }
    }

    /// What names the client within its tenant (crate::clients) on NATS: the connection's
    /// name, else its user or nkey.
    pub fn nats_client(&self) -> Option<&str> {
        match &self.authenticated {
            Some(Authenticated::Nats(c)) => c.name.as_deref().or(c.user.as_deref()).or(c.nkey.as_deref()),
            _ => None,
        }
    }

    /// Any part of the identity was verified by Envoy or the broker.
    pub fn is_authenticated(&self) -> bool {
        self.certificate.is_some() || self.authenticated.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_id_matters_only_until_the_connection_authenticates() {
        let mut id = Identity::default();
        assert!(id.client_id_matters(Some(b"acme-1")), "first sight");
        id.client_id = Some("acme-1".into());
        assert!(!id.client_id_matters(Some(b"acme-1")), "unchanged");
        assert!(id.client_id_matters(Some(b"globex-1")), "changed");
        assert!(id.client_id_matters(None), "dropped");
        id.authenticated = Some(Authenticated::Kafka(KafkaPrincipal {
            name: "alice".into(),
            claims: vec![],
        }));
        assert!(!id.client_id_matters(Some(b"globex-1")), "after SASL it is ignored");
        let cert = Identity {
            certificate: Some(PeerCertificate::default()),
            ..Identity::default()
        };
        assert!(
            !cert.client_id_matters(Some(b"globex-1")),
            "with a client certificate too"
        );
    }

    #[test]
    fn a_label_names_the_most_trusted_part() {
        let mut id = Identity {
            client_id: Some("acme-1".into()),
            ..Identity::default()
        };
        assert_eq!(id.label(), "client.id acme-1");
        id.certificate = Some(PeerCertificate {
            subject: "CN=acme".into(),
            sans: vec![],
        });
        assert_eq!(id.label(), "certificate CN=acme");
        id.authenticated = Some(Authenticated::Nats(NatsCredentials::new(
            Some("acme".into()),
            None,
            None,
        )));
        assert_eq!(id.label(), "user acme");
        assert_eq!(Identity::default().label(), "anonymous");
        let nothing = Identity {
            authenticated: Some(Authenticated::Nats(NatsCredentials::default())),
            ..Identity::default()
        };
        assert_eq!(nothing.label(), "no credentials");
    }

    #[test]
    fn a_user_jwt_names_its_user_key_and_account() {
        // {"sub":"UABC","iss":"ASIGNER","nats":{"issuer_account":"AACCOUNT"}}
        let signed_by_signing_key = format!(
            "e30.{}.sig",
            crate::jwt::base64url_encode(br#"{"sub":"UABC","iss":"ASIGNER","nats":{"issuer_account":"AACCOUNT"}}"#)
        );
        let c = NatsCredentials::new(None, None, Some(&signed_by_signing_key));
        assert_eq!(c.nkey.as_deref(), Some("UABC"));
        assert_eq!(c.account.as_deref(), Some("AACCOUNT"));
        let signed_by_account = format!(
            "e30.{}.sig",
            crate::jwt::base64url_encode(br#"{"sub":"UABC","iss":"AACCOUNT"}"#)
        );
        let c = NatsCredentials::new(Some("u".into()), None, Some(&signed_by_account));
        assert_eq!(c.account.as_deref(), Some("AACCOUNT"));
        assert_eq!(c.user.as_deref(), Some("u"));
        let plain = NatsCredentials::new(None, Some("UKEY".into()), Some("garbage"));
        assert_eq!((plain.nkey.as_deref(), plain.account), (Some("UKEY"), None));
    }
}
