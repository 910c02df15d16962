//! A configuration from the last one and what the control plane's tenant feed says changed
//! (control-plane/internal/tenantfeed): the tenants it names are parsed, those it removes
//! dropped, and every other tenant is the last configuration's own. A change of the replica
//! count builds the global tenants again, from the tenants as sent.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::rc::Rc;

use super::reuse::{Parsed, TenantKey, Tenants, TenantsByJson};
use super::{parse_tenant, Config, ConfigError, Frame, TenantId};

/// The feed's answer (tenantfeed.Delta).
#[derive(Deserialize)]
struct Delta<'a> {
    version: String,
    /// The live replica count; 0 while the control plane answering does not know it yet (no
    /// gateway connected to it, and the gateway's pods not yet counted): this one's is kept.
    replicas: u64,
    /// The tenants are every tenant: any other is gone.
    #[serde(default)]
    full: bool,
    #[serde(borrow)]
    tenants: Vec<&'a RawValue>,
    #[serde(default)]
    removed: Vec<String>,
}

impl Config {
    /// This configuration with a feed delta applied, `known` kept as parse_reusing leaves it.
    pub fn with_delta(&self, bytes: &[u8], known: &mut Tenants) -> Result<Config, ConfigError> {
        let delta: Delta = serde_json::from_slice(bytes).map_err(|e| ConfigError::Json(e.to_string()))?;
        let before = self.replicas;
        let replicas = if delta.replicas == 0 { before } else { delta.replicas };
        let known = &mut known.0[self.protocol.index()];
        // Each tenant with its key, and whether it is parsed for this configuration.
        let mut entries: Vec<Option<(TenantKey, Parsed, bool)>> = if delta.full {
            Vec::new()
        } else {
            self.sources
                .iter()
                .zip(self.tenants.iter().zip(&self.plans))
                .map(|(&(key, ref source), (tenant, plan))| {
                    let parsed = Parsed {
                        tenant: tenant.clone(),
                        plan: plan.clone(),
                        source: source.clone(),
                        replicas: before,
                    };
                    Some((key, parsed, false))
                })
                .collect()
        };
        let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(entries.len());
        for (i, t) in self.tenants.iter().enumerate().take(entries.len()) {
            by_name.insert(&t.name, i);
        }
        let mut dropped = Vec::new();
        for name in &delta.removed {
            if let Some(&i) = by_name.get(name.as_str()) {
                dropped.extend(entries[i].take().map(|(k, _, _)| k));
            }
        }
        for raw in &delta.tenants {
            let key = TenantKey::of(raw.get().as_bytes());
            let entry = match known.get(&key) {
                Some(p) if !p.tenant.global || p.replicas == replicas => (key, p.clone(), false),
                _ => (
                    key,
                    Parsed::new(self.protocol, Rc::new(parse_tenant(raw)?), replicas),
                    true,
                ),
            };
            match by_name.get(entry.1.tenant.name.as_str()) {
                Some(&i) => dropped.extend(entries[i].replace(entry).map(|(k, _, _)| k)),
                None => entries.push(Some(entry)),
            }
        }
        let mut parsed: Vec<TenantId> = Vec::new();
        let mut fresh: Vec<(TenantKey, Parsed)> = Vec::new();
        let mut kept = Vec::with_capacity(entries.len());
        for (key, mut e, new) in entries.into_iter().flatten() {
            let rebuilt = e.tenant.global && e.replicas != replicas;
            if rebuilt {
                e = Parsed::new(self.protocol, e.source.clone(), replicas);
            }
            if new || rebuilt {
                parsed.push(kept.len());
            }
            if new || rebuilt || delta.full {
                fresh.push((key, e.clone()));
            }
            kept.push((key, e));
        }
        let mut quota = self.quota.clone();
        if let Some(q) = quota.as_mut() {
            q.replicas = replicas;
        }
        let frame = Frame {
            version: delta.version,
            protocol: self.protocol,
            default_tenant: self.tenants[self.default_tenant].name.clone(),
            broker_routes: self.broker_routes.clone(),
            nats_listeners: self.nats_listeners.clone(),
            kafka_clusters: self.kafka_clusters.clone(),
            quota,
            reports: self.reports.clone(),
            backlog: self.backlog,
            feed: self.feed,
            replicas,
        };
        let config = Config::assemble(frame, kept, parsed)?;
        if delta.full {
            *known = TenantsByJson::with_capacity(fresh.len());
        }
        for key in dropped {
            known.remove(&key);
        }
        known.extend(fresh);
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(known: &mut Tenants) -> Config {
        let doc = r#"{"version":"1-a","protocol":"nats","defaultTenant":"anonymous","feed":true,
            "quota":{"cluster":"q","authority":"q:1","replicas":3,"timeoutMs":100},"tenants":[
            {"name":"acme","identify":{"natsUsers":["acme"]},"limits":{"maxMessageBytes":100}},
            {"name":"globex","global":true,"identify":{"natsUsers":["globex"]},"limits":{"inFlight":9}},
            {"name":"anonymous","limits":{}}]}"#;
        match Config::parse_reusing(doc.as_bytes(), known) {
            Ok(c) => c,
            Err(e) => unreachable!("{e}"),
        }
    }

    fn apply(c: &Config, known: &mut Tenants, delta: &str) -> Config {
        match c.with_delta(delta.as_bytes(), known) {
            Ok(c) => c,
            Err(e) => unreachable!("{e}"),
        }
    }

    /// Another replica's version of the same number (it numbered a change apart) is still a new
    /// configuration: what connections cached for the last one is not kept for it.
    #[test]
    fn a_delta_of_the_same_generation_is_built_anew() {
        let mut known = Tenants::default();
        let first = base(&mut known);
        let other = apply(&first, &mut known, r#"{"version":"1-z","replicas":3,"tenants":[]}"#);
        assert_eq!(other.generation, first.generation);
        assert_ne!(other.built, first.built);
    }

    /// A changed tenant is parsed and found by its identity; the others are the last
    /// configuration's own; an added one is found; a removed one is gone, its user now the
    /// default tenant's.
    #[test]
    fn a_delta_touches_only_the_tenants_it_names() {
        let mut known = Tenants::default();
        let first = base(&mut known);
        let second = apply(
            &first,
            &mut known,
            r#"{"version":"2-b","replicas":3,"tenants":[
                {"name":"acme","identify":{"natsUsers":["acme"]},"limits":{"maxMessageBytes":200}},
                {"name":"initech","identify":{"natsUsers":["initech"]},"limits":{"maxMessageBytes":7}}],
                "removed":["globex"]}"#,
        );
        assert_eq!((second.version.as_str(), second.generation), ("2-b", 2));
        let acme = second.tenant_for(&nats_user("acme"));
        assert_eq!(second.tenants[acme].limits.max_message_bytes, Some(200));
        let initech = second.tenant_for(&nats_user("initech"));
        assert_eq!(second.tenants[initech].limits.max_message_bytes, Some(7));
        assert_eq!(second.tenant_for(&nats_user("globex")), second.default_tenant());
        assert_eq!(second.tenants.len(), 3);
        let anonymous = second.default_tenant();
        assert!(Rc::ptr_eq(&first.tenants[2], &second.tenants[anonymous]));
        let mut parsed: Vec<&str> = second.parsed.iter().map(|&i| second.tenants[i].name.as_str()).collect();
        parsed.sort_unstable();
        assert_eq!(parsed, ["acme", "initech"]);
        // A full configuration afterwards reuses what the delta parsed.
        let doc = r#"{"version":"3-c","protocol":"nats","defaultTenant":"anonymous",
            "quota":{"cluster":"q","authority":"q:1","replicas":3,"timeoutMs":100},"tenants":[
            {"name":"acme","identify":{"natsUsers":["acme"]},"limits":{"maxMessageBytes":200}},
            {"name":"anonymous","limits":{}}]}"#;
        match Config::parse_reusing(doc.as_bytes(), &mut known) {
            Ok(c) => assert!(c.parsed.is_empty(), "{:?}", c.parsed),
            Err(e) => unreachable!("{e}"),
        }
    }

    /// A new replica count splits the global tenants' concurrency again, from what was sent,
    /// and is the quota fallback's divisor; the other tenants are untouched.
    #[test]
    fn a_new_replica_count_builds_the_global_tenants_again() {
        let mut known = Tenants::default();
        let first = base(&mut known);
        assert_eq!(first.tenants[1].limits.in_flight, Some(3));
        let scaled = apply(&first, &mut known, r#"{"version":"1-a","replicas":2,"tenants":[]}"#);
        assert_eq!(scaled.tenants[1].limits.in_flight, Some(5));
        assert_eq!(scaled.quota.as_ref().map(|q| q.replicas), Some(2));
        assert_eq!(scaled.parsed, vec![1]);
        assert!(Rc::ptr_eq(&first.tenants[0], &scaled.tenants[0]));
        let back = apply(&scaled, &mut known, r#"{"version":"1-a","replicas":3,"tenants":[]}"#);
        assert_eq!(back.tenants[1].limits.in_flight, Some(3));
    }

    /// Without global tenants there is no quota service, and the configuration still holds the
    /// replica count it was told: a worker names it when it polls again, and a feed counting
    /// more replicas than the quota's default would otherwise answer it at once, forever.
    #[test]
    fn the_replica_count_told_is_held_without_global_tenants() {
        let mut known = Tenants::default();
        let doc = r#"{"version":"1-a","protocol":"nats","defaultTenant":"anonymous","feed":true,
            "tenants":[{"name":"anonymous","limits":{}}]}"#;
        let first = match Config::parse_reusing(doc.as_bytes(), &mut known) {
            Ok(c) => c,
            Err(e) => unreachable!("{e}"),
        };
        assert_eq!((first.replicas, first.quota.is_none()), (1, true));
        let told = apply(&first, &mut known, r#"{"version":"1-a","replicas":2,"tenants":[]}"#);
        assert_eq!(told.replicas, 2);
        let unknown = apply(&told, &mut known, r#"{"version":"1-a","replicas":0,"tenants":[]}"#);
        assert_eq!(unknown.replicas, 2);
    }

    /// A full delta replaces every tenant; one that would leave no default tenant is refused
    /// and changes nothing.
    #[test]
    fn a_full_delta_is_every_tenant() {
        let mut known = Tenants::default();
        let first = base(&mut known);
        let full = apply(
            &first,
            &mut known,
            r#"{"version":"4-d","replicas":3,"full":true,"tenants":[{"name":"anonymous","limits":{}}]}"#,
        );
        assert_eq!(full.tenants.len(), 1);
        assert_eq!(full.tenant_for(&nats_user("acme")), full.default_tenant());
        let refused = full.with_delta(
            br#"{"version":"5-e","replicas":3,"removed":["anonymous"],"tenants":[]}"#,
            &mut known,
        );
        assert!(matches!(refused, Err(ConfigError::UnknownDefaultTenant(_))));
        assert!(full.with_delta(b"{", &mut known).is_err());
    }

    fn nats_user(user: &str) -> crate::identity::Identity {
        use crate::identity::{Authenticated, Identity, NatsCredentials};
        Identity {
            authenticated: Some(Authenticated::Nats(NatsCredentials {
                user: Some(user.into()),
                nkey: None,
                account: None,
                name: None,
            })),
            ..Identity::default()
        }
    }
}
