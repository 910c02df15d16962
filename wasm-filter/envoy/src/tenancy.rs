//! Which tenant a connection belongs to, kept current across policy reloads: the connection
//! remembers who it is (NATS user, Kafka client id / SASL user) and is attributed again whenever
//! the VM's configuration generation changes.

use std::rc::Rc;
use weighstation_core::config::{Config, Protocol, Tenant, TenantId};

use crate::metrics::TenantMetrics;
use crate::state;

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

pub struct Attribution {
    protocol: Protocol,
    identity: Identity,
    config: Option<Rc<Config>>,
    tenant: Option<TenantId>,
    metrics: TenantMetrics,
}

impl Attribution {
    pub fn new(protocol: Protocol) -> Self {
        Attribution {
            protocol,
            identity: Identity::Unknown,
            config: None,
            tenant: None,
            metrics: TenantMetrics::default(),
        }
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Records who the client is and attributes it.
    pub fn identify(&mut self, identity: Identity) {
        if self.identity != identity {
            self.identity = identity;
            self.attribute();
        }
    }

    /// Picks up a newer configuration, if any; call before each decision.
    pub fn refresh(&mut self) {
        let active = state::active(self.protocol);
        let changed = match (&self.config, &active) {
            (Some(mine), Some(now)) => !Rc::ptr_eq(mine, now),
            (None, Some(_)) => true,
            _ => false,
        };
        if changed {
            self.config = active;
            if self.identity != Identity::Unknown {
                self.attribute();
            }
        }
    }

    fn attribute(&mut self) {
        if self.config.is_none() {
            self.config = state::active(self.protocol);
        }
        let Some(config) = self.config.as_ref() else {
            return;
        };
        let tenant = match &self.identity {
            Identity::Unknown => return,
            Identity::Nats { user } => config.tenant_for_nats_user(user.as_deref()),
            Identity::Kafka { client_id, sasl_user } => {
                config.tenant_for_kafka(client_id.as_deref(), sasl_user.as_deref())
            }
        };
        let name = config.tenant(tenant).map(|t| t.name.as_str()).unwrap_or_default();
        let metrics = TenantMetrics::for_tenant(self.protocol, name);
        if self.tenant.is_some() {
            self.metrics.connection_closed();
        }
        metrics.connection_opened();
        self.tenant = Some(tenant);
        self.metrics = metrics;
    }

    /// The connection's tenant under the active configuration, or the default tenant's if the
    /// client has not identified itself yet.
    pub fn tenant(&self) -> Option<&Tenant> {
        let config = self.config.as_ref()?;
        config.tenant(self.tenant.unwrap_or_else(|| config.default_tenant()))
    }

    pub fn metrics(&self) -> &TenantMetrics {
        &self.metrics
    }

    /// Ensures a client that never identified itself is counted under the default tenant.
    pub fn ensure_attributed(&mut self) {
        if self.tenant.is_none() {
            self.refresh();
            let default = match self.protocol {
                Protocol::Nats => Identity::Nats { user: None },
                Protocol::Kafka => Identity::Kafka {
                    client_id: None,
                    sasl_user: None,
                },
            };
            self.identify(default);
        }
    }

    pub fn closed(&mut self) {
        if self.tenant.take().is_some() {
            self.metrics.connection_closed();
        }
    }
}
