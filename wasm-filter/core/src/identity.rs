//! Who a client says it is, as tenant attribution reads it: the NATS user of its CONNECT, or
//! the Kafka client id of its requests and the SASL PLAIN user it authenticated as.

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Identity {
    /// Nothing seen yet (before CONNECT or the first Kafka request).
    #[default]
    Unknown,
    Nats {
        user: Option<String>,
    },
    Kafka {
        client_id: Option<String>,
        sasl_user: Option<String>,
    },
}

impl Identity {
    /// The identity after a Kafka request with this header client id and, if it is a SASL
    /// authentication, this user: Some if it changed (the connection is attributed again), None
    /// if not. Every request is asked, so the same identity is found without allocating. A
    /// request without a SASL user keeps the one known.
    pub fn after_kafka_request(&self, client_id: Option<&[u8]>, sasl_user: Option<&[u8]>) -> Option<Identity> {
        let (client_same, known_sasl) = match self {
            Identity::Kafka {
                client_id: known_client,
                sasl_user: known_sasl,
            } => (
                known_client.as_deref().map(str::as_bytes) == client_id,
                known_sasl.as_deref(),
            ),
            _ => (false, None),
        };
        let sasl_same = sasl_user.is_none() || known_sasl.map(str::as_bytes) == sasl_user;
        if client_same && sasl_same {
            return None;
        }
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Some(Identity::Kafka {
            client_id: client_id.map(text),
            sasl_user: sasl_user.map(text).or_else(|| known_sasl.map(str::to_owned)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kafka(client_id: Option<&str>, sasl_user: Option<&str>) -> Identity {
        Identity::Kafka {
            client_id: client_id.map(str::to_owned),
            sasl_user: sasl_user.map(str::to_owned),
        }
    }

    /// A Kafka request seen with the identity `known`, and the identity it should lead to.
    struct Case {
        name: &'static str,
        known: Identity,
        client_id: Option<&'static [u8]>,
        sasl_user: Option<&'static [u8]>,
        want: Option<Identity>,
    }

    #[test]
    fn a_kafka_request_changes_the_identity_only_when_who_it_names_changes() {
        let app = || kafka(Some("app"), None);
        let alice = || kafka(Some("app"), Some("alice"));
        let cases = [
            Case {
                name: "first request",
                known: Identity::Unknown,
                client_id: Some(b"app"),
                sasl_user: None,
                want: Some(app()),
            },
            Case {
                name: "first request without a client id",
                known: Identity::Unknown,
                client_id: None,
                sasl_user: None,
                want: Some(kafka(None, None)),
            },
            Case {
                name: "same client id",
                known: app(),
                client_id: Some(b"app"),
                sasl_user: None,
                want: None,
            },
            Case {
                name: "still no client id",
                known: kafka(None, None),
                client_id: None,
                sasl_user: None,
                want: None,
            },
            Case {
                name: "new client id",
                known: app(),
                client_id: Some(b"other"),
                sasl_user: None,
                want: Some(kafka(Some("other"), None)),
            },
            Case {
                name: "client id dropped",
                known: app(),
                client_id: None,
                sasl_user: None,
                want: Some(kafka(None, None)),
            },
            Case {
                name: "SASL user appears",
                known: app(),
                client_id: Some(b"app"),
                sasl_user: Some(b"alice"),
                want: Some(alice()),
            },
            Case {
                name: "same SASL user",
                known: alice(),
                client_id: Some(b"app"),
                sasl_user: Some(b"alice"),
                want: None,
            },
            Case {
                name: "SASL user absent on a later request keeps the known one",
                known: alice(),
                client_id: Some(b"app"),
                sasl_user: None,
                want: None,
            },
            Case {
                name: "new client id keeps the known SASL user",
                known: alice(),
                client_id: Some(b"other"),
                sasl_user: None,
                want: Some(kafka(Some("other"), Some("alice"))),
            },
            Case {
                name: "new SASL user",
                known: alice(),
                client_id: Some(b"app"),
                sasl_user: Some(b"bob"),
                want: Some(kafka(Some("app"), Some("bob"))),
            },
            Case {
                name: "a NATS identity is replaced",
                known: Identity::Nats {
                    user: Some("app".into()),
                },
                client_id: Some(b"app"),
                sasl_user: None,
                want: Some(app()),
            },
            Case {
                name: "bytes that are not UTF-8 are read lossily",
                known: Identity::Unknown,
                client_id: Some(b"app\xff"),
                sasl_user: None,
                want: Some(kafka(Some("app\u{fffd}"), None)),
            },
        ];
        for c in cases {
            assert_eq!(
                c.known.after_kafka_request(c.client_id, c.sasl_user),
                c.want,
                "{}",
                c.name
            );
        }
    }
}
