//! Which tenant a connection belongs to, kept current across policy reloads: the connection
//! remembers who it is (its verified client certificate, the credentials the broker accepted,
//! the Kafka client id it claims — see weighstation_core::identity) and is attributed again
//! whenever that changes or the VM's configuration does. It also holds the connection's place
//! in its tenant's connection count.

use std::rc::Rc;
use weighstation_core::config::{Config, Protocol, Tenant, TenantId, TenantPlan};
use weighstation_core::identity::{Authenticated, Identity};
use weighstation_core::limits::Reason;

use crate::clients::{ClientBucket, ClientSeat};
use crate::keys::TenantKeys;
use crate::metrics::TenantMetrics;
use crate::{clock, reports, shared, state, trust};

/// The tenant a connection is attributed to, with what deciding for it needs.
pub struct Attributed {
    pub config: Rc<Config>,
    pub id: TenantId,
    pub keys: Rc<TenantKeys>,
    pub metrics: TenantMetrics,
}

impl Attributed {
    pub fn tenant(&self) -> Option<&Tenant> {
        self.config.tenant(self.id)
    }

    pub fn plan(&self) -> Option<&TenantPlan> {
        self.config.plan(self.id)
    }

    pub fn name(&self) -> &str {
        self.tenant().map(|t| t.name.as_str()).unwrap_or_default()
    }
}

pub struct Attribution {
    protocol: Protocol,
    identity: Identity,
    current: Option<Attributed>,
    certificate_read: bool,
    client: ClientSeat,
}

impl Attribution {
    pub fn new(protocol: Protocol) -> Self {
        Attribution {
            protocol,
            identity: Identity::default(),
            current: None,
            certificate_read: false,
            client: ClientSeat::default(),
        }
    }

    /// Where a decision about this connection's tenant is made, for the decision log: the
    /// limit of override `by` (None: the tenant's own) decided at `now`.
    pub fn site(&self, by: Option<usize>, now: u64) -> Option<reports::Site<'_>> {
        let who = self.current()?;
        Some(reports::Site {
            config: &who.config,
            tenant: who.tenant()?,
            over: by,
            identity: &self.identity,
            now,
        })
    }

    pub fn current(&self) -> Option<&Attributed> {
        self.current.as_ref()
    }

    /// Reads the client certificate Envoy verified, once, on the connection's first bytes
    /// (the stream must be the effective context).
    pub fn read_certificate(&mut self) {
        if !std::mem::replace(&mut self.certificate_read, true) {
            self.identity.certificate = trust::peer_certificate();
        }
    }

    /// The broker accepted these credentials: attribute by them, taking a place in the tenant's
    /// connection count, or say why its connection limit refuses the connection.
    pub fn authenticated(&mut self, who: Authenticated) -> Result<(), String> {
        self.identity.authenticated = Some(who);
        self.attribute(true)
    }

    /// The SASL principal the broker accepted on this connection (Kafka's `user` entity).
    pub fn kafka_principal(&self) -> Option<&str> {
        match &self.identity.authenticated {
            Some(Authenticated::Kafka(p)) => Some(&p.name),
            _ => None,
        }
    }

    /// The bucket of the client a message comes from, if its tenant limits its clients.
    pub fn client_bucket(&mut self, kafka_client_id: Option<&[u8]>, now: u64) -> Option<Rc<ClientBucket>> {
        let who = self.current.as_ref()?;
        who.keys.clients.as_ref()?;
        let (principal, name) = client_of(self.protocol, &self.identity, kafka_client_id);
        self.client.bucket(who, principal, name, now)
    }

    /// The name of the client a message comes from (weighstation_core::clients).
    pub fn client_name<'a>(&'a self, kafka_client_id: Option<&'a [u8]>) -> &'a [u8] {
        client_of(self.protocol, &self.identity, kafka_client_id).1
    }

    /// Counts the connection for its client (NATS: once authenticated; Kafka: at each
    /// request, whose client id may name another client), or says why the client's connection
    /// limit refuses it.
    pub fn client_connection(&mut self, kafka_client_id: Option<&[u8]>) -> Result<(), String> {
        let Some(who) = self.current.as_ref().filter(|w| w.keys.clients.is_some()) else {
            return Ok(());
        };
        let (principal, name) = client_of(self.protocol, &self.identity, kafka_client_id);
        self.client.connect(who, principal, name, clock::now_ns())
    }

    /// A Kafka request's client id: the connection is attributed again if it matters (only
    /// while nothing authenticated it) and changed. Err if the tenant's connection limit
    /// refuses the connection.
    pub fn claimed_client_id(&mut self, client_id: Option<&[u8]>) -> Result<(), String> {
        if !self.identity.client_id_matters(client_id) && self.current.is_some() {
            return Ok(());
        }
        self.identity.client_id = client_id.map(|c| String::from_utf8_lossy(c).into_owned());
        self.attribute(true)
    }

    /// Picks up a newer configuration, if any; true if the connection was attributed again.
    pub fn refresh(&mut self) -> bool {
        let active = state::active(self.protocol);
        let changed = match (&self.current, &active) {
            (Some(cur), Some(now)) => !Rc::ptr_eq(&cur.config, now),
            _ => false,
        };
        if changed {
            // An open connection is never closed by a reload: it moves without a limit check.
            let _ = self.attribute(false);
        }
        changed
    }

    /// Ensures a connection not yet attributed counts for the tenant its identity so far names
    /// (the default tenant, or its certificate's).
    pub fn ensure_attributed(&mut self) {
        if self.current.is_none() {
            let _ = self.attribute(false);
        }
    }

    fn attribute(&mut self, check_limit: bool) -> Result<(), String> {
        let Some(config) = state::active(self.protocol) else {
            return Ok(());
        };
        let id = config.tenant_for(&self.identity);
        let (Some(tenant), Some(plan)) = (config.tenant(id), config.plan(id)) else {
            return Ok(());
        };
        let keys = Rc::new(TenantKeys::new(self.protocol, &tenant.name, plan, config.scope(id)));
        let metrics = TenantMetrics::for_tenant(self.protocol, &tenant.name);
        let enforce = check_limit && !tenant.dry_run;
        let limit = tenant.limits.connections.filter(|_| enforce);
        if let Some(old) = self.current.take() {
            shared::release(&old.keys.connections);
            old.metrics.connections(-1);
        }
        if !shared::acquire(&keys.connections, limit) {
            metrics.refused(Reason::Connections, 1);
            let detail = format!(
                "maximum connections exceeded (connections limit of tenant {}: {})",
                tenant.name,
                limit.unwrap_or_default()
            );
            let site = reports::Site {
                config: &config,
                tenant,
                over: None,
                identity: &self.identity,
                now: clock::now_ns(),
            };
            let told = reports::Told {
                detail: &detail,
                code: "connection closed",
                retry_after_ms: 0,
            };
            reports::refused(&site, Reason::Connections, &told, Vec::new, || {
                "every connection taken".to_owned()
            });
            return Err(detail);
        }
        if check_limit
            && tenant.dry_run
            && tenant
                .limits
                .connections
                .is_some_and(|m| shared::read(&keys.connections) > m)
        {
            metrics.would_refuse(Reason::Connections, 1);
        }
        metrics.connections(1);
        self.current = Some(Attributed {
            config,
            id,
            keys,
            metrics,
        });
        Ok(())
    }

    pub fn closed(&mut self) {
        self.client.closed();
        if let Some(cur) = self.current.take() {
            shared::release(&cur.keys.connections);
            cur.metrics.connections(-1);
        }
    }
}

/// Who a client is within its tenant (weighstation_core::clients): on Kafka the request's client
/// id with the connection's principal or certificate, on NATS the connection's name, else its
/// user or nkey.
fn client_of<'a>(
    protocol: Protocol,
    id: &'a Identity,
    kafka_client_id: Option<&'a [u8]>,
) -> (Option<&'a [u8]>, &'a [u8]) {
    match protocol {
        Protocol::Kafka => {
            let principal = match (&id.authenticated, &id.certificate) {
                (Some(Authenticated::Kafka(p)), _) => Some(p.name.as_bytes()),
                (_, Some(c)) => Some(c.subject.as_bytes()),
                _ => None,
            };
            (principal, kafka_client_id.unwrap_or_default())
        }
        Protocol::Nats => (None, id.nats_client().unwrap_or_default().as_bytes()),
    }
}
