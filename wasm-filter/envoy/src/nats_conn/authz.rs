//! The glue of weighstation_core::nats::authz: a publish or a subscription the tenant may not
//! make is refused as nats-server refuses one (`Permissions Violation for Publish to "…"`, or
//! `Subscription to`), counted as reason permission and logged with the subject. A publish's
//! decision is kept per subject on the connection until the policy changes.

use weighstation_core::limits::Reason;
use weighstation_core::nats::Verdict;

use super::Conn;
use crate::reports;

impl Conn {
    /// Some(refusal) if the tenant may not publish to `subject`.
    pub(super) fn may_not_publish(&mut self, subject: &[u8], now: u64) -> Option<Verdict> {
        let who = self.who.current()?;
        let tenant = who.tenant()?;
        let refusal = self
            .decisions
            .publish(who.config.built, &tenant.nats_permissions, subject)
            .err()?;
        let detail = format!("not granted by {}", refusal.field());
        Some(self.refuse("Publish to", subject, &detail, now))
    }

    /// Some(refusal) if the tenant may not subscribe to `subject`.
    pub(super) fn may_not_subscribe(&mut self, subject: &[u8], now: u64) -> Option<Verdict> {
        let tenant = self.who.current()?.tenant()?;
        if tenant.nats_permissions.subscribe(subject) {
            return None;
        }
        Some(self.refuse(
            "Subscription to",
            subject,
            "not granted by spec.permissions.nats.subscribe",
            now,
        ))
    }

    fn refuse(&self, what: &str, subject: &[u8], detail: &str, now: u64) -> Verdict {
        let text = format!(
            "Permissions Violation for {what} \"{}\"",
            String::from_utf8_lossy(subject)
        );
        if let Some(who) = self.who.current() {
            who.metrics.refused(Reason::Permission, 1);
        }
        if let Some(site) = self.who.site(None, now) {
            let told = reports::Told {
                detail,
                code: "-ERR 'Permissions Violation'",
                retry_after_ms: 0,
            };
            reports::refused(
                &site,
                Reason::Permission,
                &told,
                || subject.to_vec(),
                || format!("{what} {}", String::from_utf8_lossy(subject)),
            );
        }
        Verdict::Refuse(text)
    }
}
