use proxy_wasm::traits::{Context, RootContext, StreamContext};
use proxy_wasm::types::ContextType;
use weighstation_core::config::{Config, Protocol};

use std::time::Duration;

use crate::{clock, feed, kafka_conn, leases, metrics, nats_conn, quota, reports, state, waiters};

/// The tick the driving root keeps while no connection is held, when the usage reports need
/// one (the quota leader needs `quota::TICK`).
const IDLE_TICK: Duration = Duration::from_millis(200);

/// One per listener filter configuration (and per reconfiguration).
pub struct Root {
    id: u32,
    protocol: Option<Protocol>,
}

impl Root {
    pub fn new(id: u32) -> Self {
        Root { id, protocol: None }
    }
}

/// This Envoy's node id: how the quota service and the control plane tell replicas apart.
pub fn replica(ctx: &dyn Context) -> String {
    // `xds.node` in current Envoy; `node` in older releases.
    [vec!["xds", "node", "id"], vec!["node", "id"]]
        .into_iter()
        .find_map(|path| ctx.get_property(path).filter(|b| !b.is_empty()))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

impl Root {
    /// Puts `config` in force in this VM: from on_configure, or from the tenant feed.
    fn install(&self, config: Config) {
        log::info!(
            "weighstation: {} policy version {} in force ({} tenants, {} of them new or changed)",
            config.protocol.as_str(),
            config.version,
            config.tenants.len(),
            config.parsed.len()
        );
        metrics::configuration_installed(&config);
        state::install(config);
        leases::prune();
        metrics::flush();
        waiters::set_driver(self.id);
        let sharing = quota::configure(replica(self));
        let reporting = reports::configure(replica(self));
        waiters::set_idle_tick(if sharing {
            quota::TICK
        } else if reporting {
            IDLE_TICK
        } else {
            Duration::ZERO
        });
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        feed::root_gone(self.id);
    }
}

impl Context for Root {
    fn on_http_call_response(&mut self, token_id: u32, _num_headers: usize, body_size: usize, _num_trailers: usize) {
        let now = clock::now_ns();
        match feed::answer(self, token_id, body_size, now) {
            feed::Answer::NotOurs => {}
            feed::Answer::Nothing => return feed::tick(self, self.id, now),
            feed::Answer::Install(config) => {
                self.install(*config);
                return feed::tick(self, self.id, now);
            }
        }
        if !reports::answer(self, token_id) {
            quota::answer(self, token_id, body_size, now);
        }
    }
}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let Some(bytes) = self.get_plugin_configuration() else {
            log::error!("weighstation: no plugin configuration");
            return false;
        };
        match state::parse(&bytes) {
            Ok(config) => {
                self.protocol = Some(config.protocol);
                let now = clock::now_ns();
                feed::configured(config.protocol);
                self.install(config);
                // At once, not at the next tick: until a worker has polled, the control plane
                // cannot count it among the node's workers that must run a newer version.
                feed::tick(self, self.id, now);
                true
            }
            Err(e) => {
                log::error!("weighstation: configuration refused: {e}");
                false
            }
        }
    }

    fn on_tick(&mut self) {
        let now = clock::now_ns();
        waiters::tick(self.id, now);
        quota::tick(self, now);
        reports::tick(self, now);
        feed::tick(self, self.id, now);
        metrics::flush();
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::StreamContext)
    }

    fn create_stream_context(&self, context_id: u32) -> Option<Box<dyn StreamContext>> {
        match self.protocol? {
            Protocol::Nats => Some(Box::new(nats_conn::connection(context_id))),
            Protocol::Kafka => Some(Box::new(kafka_conn::connection(context_id))),
        }
    }
}
