//! Which tenant a connection belongs to, kept current across policy reloads: the connection
//! remembers who it is (NATS user, Kafka client id / SASL user) and is attributed again whenever
//! the VM's configuration changes. It also holds the connection's place in its tenant's
//! connection count.

use std::rc::Rc;
use weighstation_core::config::{Config, Protocol, Tenant, TenantId, TenantPlan};
use weighstation_core::identity::Identity;
use weighstation_core::limits::Reason;

use crate::keys::TenantKeys;
use crate::metrics::TenantMetrics;
use crate::{shared, state};

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
}

impl Attribution {
    pub fn new(protocol: Protocol) -> Self {
        Attribution {
            protocol,
            identity: Identity::Unknown,
            current: None,
        }
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    pub fn current(&self) -> Option<&Attributed> {
        self.current.as_ref()
    }

    /// A new client identifies itself: attribute it and take a place in its tenant's connection
    /// count, or say why the tenant's connection limit refuses it.
    pub fn connect(&mut self, identity: Identity) -> Result<(), String> {
        self.identity = identity;
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

    /// Ensures a client that never identified itself is attributed to the default tenant.
    pub fn ensure_attributed(&mut self) {
        if self.current.is_none() {
            let default = match self.protocol {
                Protocol::Nats => Identity::Nats { user: None },
                Protocol::Kafka => Identity::Kafka {
                    client_id: None,
                    sasl_user: None,
                },
            };
            if self.identity == Identity::Unknown {
                self.identity = default;
            }
            let _ = self.attribute(false);
        }
    }

    fn attribute(&mut self, check_limit: bool) -> Result<(), String> {
        let Some(config) = state::active(self.protocol) else {
            return Ok(());
        };
        let id = match &self.identity {
            Identity::Unknown => return Ok(()),
            Identity::Nats { user } => config.tenant_for_nats_user(user.as_deref()),
            Identity::Kafka { client_id, sasl_user } => {
                config.tenant_for_kafka(client_id.as_deref(), sasl_user.as_deref())
            }
        };
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
            return Err(format!(
                "maximum connections exceeded (connections limit of tenant {}: {})",
                tenant.name,
                limit.unwrap_or_default()
            ));
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
        if let Some(cur) = self.current.take() {
            shared::release(&cur.keys.connections);
            cur.metrics.connections(-1);
        }
    }
}
