//! What a tenant may do through the NATS listeners: the subjects it may publish and subscribe
//! to, and the JetStream API requests that destroy or change streams, which it may send only
//! for the streams it is granted. A client known by certificate or by no credentials is
//! nats-server's to the gateway alone, so the gateway decides; a refusal reads as nats-server's
//! own (`Permissions Violation for Publish to "…"`, which clients do not take for fatal).

use crate::patterns::{glob_matches, nats_matches};
use serde::Deserialize;

/// A tenant's NATS permissions (spec.permissions.nats, resolved by the control plane).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grants {
    /// Subjects it may publish to; None: every subject.
    #[serde(default)]
    pub publish: Option<Vec<String>>,
    /// Subjects it may subscribe to; None: every subject.
    #[serde(default)]
    pub subscribe: Option<Vec<String>>,
    /// Streams (names with * and ?) it may delete, purge or update, and delete consumers of.
    #[serde(default)]
    pub jet_stream_admin: Vec<String>,
}

/// The JetStream API requests that destroy or change a stream, after `$JS.API.` (or
/// `$JS.<domain>.API.`): the stream's name is the next token.
const STREAM_ADMIN: [&[u8]; 4] = [
    b"STREAM.DELETE.",
    b"STREAM.PURGE.",
    b"STREAM.UPDATE.",
    b"CONSUMER.DELETE.",
];

impl Grants {
    /// Whether the tenant may publish to `subject`; Err names why not.
    pub fn publish(&self, subject: &[u8]) -> Result<(), Refusal> {
        if let Some(stream) = stream_admin(subject) {
            if !self.jet_stream_admin.iter().any(|g| glob_matches(g, stream)) {
                return Err(Refusal::StreamAdmin);
            }
        }
        match &self.publish {
            Some(allowed) if !allowed.iter().any(|p| nats_matches(p, subject)) => Err(Refusal::Publish),
            _ => Ok(()),
        }
    }

    /// Whether the tenant may subscribe to `subject` (which may hold wildcards): every subject
    /// it matches must be one an allowed pattern matches.
    pub fn subscribe(&self, subject: &[u8]) -> bool {
        match &self.subscribe {
            Some(allowed) => allowed.iter().any(|p| covers(p.as_bytes(), subject)),
            None => true,
        }
    }
}

/// Why a publish is refused: the policy field that would grant it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Publish,
    StreamAdmin,
}

impl Refusal {
    pub fn field(self) -> &'static str {
        match self {
            Refusal::Publish => "spec.permissions.nats.publish",
            Refusal::StreamAdmin => "spec.permissions.nats.jetStreamAdmin",
        }
    }
}

/// The stream a JetStream API request that destroys or changes it names.
fn stream_admin(subject: &[u8]) -> Option<&[u8]> {
    let rest = subject.strip_prefix(b"$JS.")?;
    let api = match rest.strip_prefix(b"API.") {
        Some(api) => api,
        // $JS.<domain>.API.…
        None => {
            let dot = rest.iter().position(|&b| b == b'.')?;
            rest[dot + 1..].strip_prefix(b"API.")?
        }
    };
    let after = STREAM_ADMIN.iter().find_map(|prefix| api.strip_prefix(*prefix))?;
    Some(after.split(|&b| b == b'.').next().unwrap_or(after))
}

/// Whether every subject `subject` matches (it may hold `*` and a final `>`) is one `pattern`
/// matches.
fn covers(pattern: &[u8], subject: &[u8]) -> bool {
    let mut subject_tokens = subject.split(|&b| b == b'.');
    for p in pattern.split(|&b| b == b'.') {
        match (p, subject_tokens.next()) {
            (b">", Some(t)) => return !t.is_empty(),
            (b"*", Some(t)) if !t.is_empty() && t != b">" => {}
            (lit, Some(t)) if lit == t && t != b"*" && t != b">" => {}
            _ => return false,
        }
    }
    subject_tokens.next().is_none()
}

/// A connection's publish decisions, kept per subject (crate::decisions).
#[derive(Debug, Default)]
pub struct Decisions(crate::decisions::Decisions<Decision>);

/// A publish's decision: allowed, or why not.
type Decision = Result<(), Refusal>;

impl Decisions {
    pub fn publish(&mut self, built: u64, grants: &Grants, subject: &[u8]) -> Result<(), Refusal> {
        // Nothing to decide: no publish list, and not the JetStream API.
        if grants.publish.is_none() && !subject.starts_with(b"$JS.") {
            return Ok(());
        }
        self.0.decide(built, subject, |s| grants.publish(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(publish: Option<&[&str]>, subscribe: Option<&[&str]>, admin: &[&str]) -> Grants {
        let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Grants {
            publish: publish.map(own),
            subscribe: subscribe.map(own),
            jet_stream_admin: own(admin),
        }
    }

    #[test]
    fn publishing_is_open_unless_listed_and_stream_admin_closed_unless_granted() {
        let open = Grants::default();
        assert_eq!(open.publish(b"anything.at.all"), Ok(()));
        assert_eq!(
            open.publish(b"$JS.API.STREAM.CREATE.ORDERS"),
            Ok(()),
            "creating is not destroying"
        );
        for s in [
            &b"$JS.API.STREAM.DELETE.ORDERS"[..],
            b"$JS.API.STREAM.PURGE.ORDERS",
            b"$JS.API.STREAM.UPDATE.ORDERS",
            b"$JS.API.CONSUMER.DELETE.ORDERS.worker",
            b"$JS.hub.API.STREAM.DELETE.ORDERS",
        ] {
            assert_eq!(
                open.publish(s),
                Err(Refusal::StreamAdmin),
                "{}",
                String::from_utf8_lossy(s)
            );
        }
        let acme = grants(Some(&["orders.>", "$JS.API.>"]), None, &["ACME_*"]);
        assert_eq!(acme.publish(b"orders.eu.1"), Ok(()));
        assert_eq!(acme.publish(b"billing.1"), Err(Refusal::Publish));
        assert_eq!(acme.publish(b"$JS.API.STREAM.DELETE.ACME_ORDERS"), Ok(()));
        assert_eq!(acme.publish(b"$JS.API.STREAM.DELETE.GLOBEX"), Err(Refusal::StreamAdmin));
    }

    #[test]
    fn a_subscription_must_lie_within_an_allowed_pattern() {
        let g = grants(None, Some(&["orders.>", "audit.*"]), &[]);
        for (subject, ok) in [
            ("orders.eu", true),
            ("orders.*", true),
            ("orders.>", true),
            ("orders", false),
            ("audit.x", true),
            ("audit.*", true),
            ("audit.>", false),
            ("audit.x.y", false),
            (">", false),
            ("*.eu", false),
            ("billing.x", false),
        ] {
            assert_eq!(g.subscribe(subject.as_bytes()), ok, "{subject}");
        }
        assert!(Grants::default().subscribe(b">"), "none listed: every subject");
    }

    #[test]
    fn decisions_are_kept_per_subject_until_the_policy_changes() {
        let mut d = Decisions::default();
        let closed = grants(Some(&["a"]), None, &[]);
        assert_eq!(d.publish(1, &closed, b"b"), Err(Refusal::Publish));
        let widened = grants(Some(&["a", "b"]), None, &[]);
        assert_eq!(
            d.publish(1, &widened, b"b"),
            Err(Refusal::Publish),
            "kept while configuration 1 holds"
        );
        assert_eq!(
            d.publish(2, &widened, b"b"),
            Ok(()),
            "dropped with the policy that changed them"
        );
        let mut untouched = Decisions::default();
        assert_eq!(untouched.publish(1, &Grants::default(), b"b"), Ok(()));
        assert_eq!(untouched.0.kept(), 0, "no publish list: nothing decided, nothing kept");
    }
}
