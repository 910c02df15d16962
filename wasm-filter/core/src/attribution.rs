//! Which tenant an [`Identity`] belongs to: tables built once per configuration from the
//! tenants' `identify`, read once per connection (and again after a reload).
//!
//! Precedence, first match wins:
//! 1. credentials the broker accepted — NATS: the user nkey (`nats.nkeys`), then the JWT's
//!    account (`nats.accounts`), then the user (`nats.users`); Kafka: the SASL principal
//!    (`kafka.saslPrincipals`; for OAUTHBEARER the claim a tenant names in `kafka.oauthClaim`,
//!    `sub` by default);
//! 2. the client certificate Envoy verified: its subject (`tls.subjects`), then any URI or DNS
//!    SAN (`tls.sans`);
//! 3. only for a connection that authenticated in no way: the Kafka client.id prefix
//!    (`kafka.clientIdPrefixes`), longest first;
//! 4. the default tenant.

use serde::Deserialize;
use std::collections::HashMap;

use crate::identity::{Authenticated, Identity};

/// Index of a tenant in [`crate::config::Config::tenants`].
pub type TenantId = usize;

/// What a tenant is recognised by (its policy's `identify`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Identify {
    pub nats_users: Vec<String>,
    pub nats_nkeys: Vec<String>,
    pub nats_accounts: Vec<String>,
    pub kafka_client_id_prefixes: Vec<String>,
    pub kafka_sasl_principals: Vec<String>,
    pub kafka_oauth_claim: Option<String>,
    pub tls_subjects: Vec<String>,
    pub tls_sans: Vec<String>,
}

/// The OAUTHBEARER claim matched when a tenant names none.
const DEFAULT_OAUTH_CLAIM: &str = "sub";

#[derive(Debug, Default)]
pub struct Directory {
    nats_users: HashMap<String, TenantId>,
    nats_nkeys: HashMap<String, TenantId>,
    nats_accounts: HashMap<String, TenantId>,
    sasl_principals: HashMap<String, TenantId>,
    /// OAUTHBEARER: claim name → claim value → tenant.
    oauth_claims: Vec<(String, HashMap<String, TenantId>)>,
    tls_subjects: HashMap<String, TenantId>,
    tls_sans: HashMap<String, TenantId>,
    /// Longest first, so the most specific prefix wins should two ever nest.
    client_id_prefixes: Vec<(String, TenantId)>,
}

fn index(table: &mut HashMap<String, TenantId>, keys: &[String], tenant: TenantId) {
    for k in keys {
        table.insert(k.clone(), tenant);
    }
}

impl Directory {
    pub fn new<'a>(identifies: impl Iterator<Item = &'a Identify>) -> Self {
        let mut d = Directory::default();
        for (t, id) in identifies.enumerate() {
            index(&mut d.nats_users, &id.nats_users, t);
            index(&mut d.nats_nkeys, &id.nats_nkeys, t);
            index(&mut d.nats_accounts, &id.nats_accounts, t);
            index(&mut d.sasl_principals, &id.kafka_sasl_principals, t);
            index(&mut d.tls_subjects, &id.tls_subjects, t);
            index(&mut d.tls_sans, &id.tls_sans, t);
            let claim = id.kafka_oauth_claim.as_deref().unwrap_or(DEFAULT_OAUTH_CLAIM);
            let pos = match d.oauth_claims.iter().position(|(c, _)| c == claim) {
                Some(p) => p,
                None => {
                    d.oauth_claims.push((claim.to_owned(), HashMap::new()));
                    d.oauth_claims.len() - 1
                }
            };
            index(&mut d.oauth_claims[pos].1, &id.kafka_sasl_principals, t);
            d.client_id_prefixes
                .extend(id.kafka_client_id_prefixes.iter().map(|p| (p.clone(), t)));
        }
        d.client_id_prefixes.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        d
    }

    /// The tenant `who` belongs to, if any table names it.
    pub fn tenant_for(&self, who: &Identity) -> Option<TenantId> {
        let get = |table: &HashMap<String, TenantId>, key: Option<&str>| key.and_then(|k| table.get(k).copied());
        let authenticated = match &who.authenticated {
            Some(Authenticated::Nats(c)) => get(&self.nats_nkeys, c.nkey.as_deref())
                .or_else(|| get(&self.nats_accounts, c.account.as_deref()))
                .or_else(|| get(&self.nats_users, c.user.as_deref())),
            Some(Authenticated::Kafka(p)) if p.claims.is_empty() => get(&self.sasl_principals, Some(&p.name)),
            Some(Authenticated::Kafka(p)) => self.oauth_claims.iter().find_map(|(claim, table)| {
                let value = p.claims.iter().find(|(c, _)| c == claim).map(|(_, v)| v.as_str());
                get(table, value)
            }),
            None => None,
        };
        let certificate = || {
            let cert = who.certificate.as_ref()?;
            get(&self.tls_subjects, Some(&cert.subject))
                .or_else(|| cert.sans.iter().find_map(|san| get(&self.tls_sans, Some(san))))
        };
        let claimed = || {
            let client_id = who.client_id.as_deref().filter(|_| !who.is_authenticated())?;
            self.client_id_prefixes
                .iter()
                .find(|(p, _)| client_id.starts_with(p.as_str()))
                .map(|(_, t)| *t)
        };
        authenticated.or_else(certificate).or_else(claimed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{KafkaPrincipal, NatsCredentials, PeerCertificate};

    fn identify(f: impl FnOnce(&mut Identify)) -> Identify {
        let mut i = Identify::default();
        f(&mut i);
        i
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Tenants 0 (acme), 1 (globex), 2 (initech).
    fn directory() -> Directory {
        let tenants = [
            identify(|i| {
                i.nats_users = strings(&["acme"]);
                i.kafka_client_id_prefixes = strings(&["acme-"]);
                i.kafka_sasl_principals = strings(&["acme-svc"]);
                i.tls_subjects = strings(&["CN=acme,O=acme"]);
            }),
            identify(|i| {
                i.nats_nkeys = strings(&["UGLOBEX"]);
                i.kafka_client_id_prefixes = strings(&["acme-eu-"]);
                i.kafka_sasl_principals = strings(&["globex-app"]);
                i.kafka_oauth_claim = Some("client_id".into());
                i.tls_sans = strings(&["spiffe://example.org/globex"]);
            }),
            identify(|i| i.nats_accounts = strings(&["AINITECH"])),
        ];
        Directory::new(tenants.iter())
    }

    fn nats(user: Option<&str>, nkey: Option<&str>, account: Option<&str>) -> Identity {
        Identity {
            authenticated: Some(Authenticated::Nats(NatsCredentials {
                user: user.map(str::to_owned),
                nkey: nkey.map(str::to_owned),
                account: account.map(str::to_owned),
                name: None,
            })),
            ..Identity::default()
        }
    }

    fn sasl(name: &str, claims: &[(&str, &str)]) -> Identity {
        Identity {
            authenticated: Some(Authenticated::Kafka(KafkaPrincipal {
                name: name.into(),
                claims: claims.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
            })),
            ..Identity::default()
        }
    }

    fn cert(subject: &str, sans: &[&str]) -> Option<PeerCertificate> {
        Some(PeerCertificate {
            subject: subject.into(),
            sans: strings(sans),
        })
    }

    #[test]
    fn each_source_attributes_in_its_order() {
        let d = directory();
        let claimed = |c: &str| Identity {
            client_id: Some(c.into()),
            ..Identity::default()
        };
        let cases: Vec<(&str, Identity, Option<TenantId>)> = vec![
            ("nothing known", Identity::default(), None),
            ("NATS user", nats(Some("acme"), None, None), Some(0)),
            (
                "NATS nkey beats user",
                nats(Some("acme"), Some("UGLOBEX"), None),
                Some(1),
            ),
            (
                "NATS account beats user",
                nats(Some("acme"), Some("Uother"), Some("AINITECH")),
                Some(2),
            ),
            ("NATS unknown", nats(Some("stranger"), None, None), None),
            ("SASL principal", sasl("acme-svc", &[]), Some(0)),
            ("SASL unknown", sasl("mallory", &[]), None),
            (
                "OAUTHBEARER by the claim the tenant names",
                sasl("someone", &[("sub", "someone"), ("client_id", "globex-app")]),
                Some(1),
            ),
            (
                "OAUTHBEARER sub for tenants that name no claim",
                sasl("acme-svc", &[("sub", "acme-svc")]),
                Some(0),
            ),
            ("longest client.id prefix", claimed("acme-eu-billing"), Some(1)),
            ("client.id prefix", claimed("acme-orders"), Some(0)),
            (
                "certificate subject",
                Identity {
                    certificate: cert("CN=acme,O=acme", &[]),
                    ..Identity::default()
                },
                Some(0),
            ),
            (
                "certificate SAN",
                Identity {
                    certificate: cert("CN=x", &["x.example.org", "spiffe://example.org/globex"]),
                    ..Identity::default()
                },
                Some(1),
            ),
            (
                "accepted credentials beat the certificate",
                Identity {
                    certificate: cert("CN=acme,O=acme", &[]),
                    ..sasl("globex-app", &[])
                },
                Some(1),
            ),
            (
                "the certificate when the credentials name no tenant",
                Identity {
                    certificate: cert("CN=acme,O=acme", &[]),
                    ..sasl("mallory", &[])
                },
                Some(0),
            ),
            (
                "no client.id once authenticated",
                Identity {
                    client_id: Some("acme-orders".into()),
                    ..sasl("mallory", &[])
                },
                None,
            ),
            (
                "no client.id with an unmapped certificate",
                Identity {
                    client_id: Some("acme-orders".into()),
                    certificate: cert("CN=x", &[]),
                    ..Identity::default()
                },
                None,
            ),
        ];
        for (name, who, want) in cases {
            assert_eq!(d.tenant_for(&who), want, "{name}");
        }
    }
}
