use proxy_wasm::traits::{Context, RootContext, StreamContext};
use proxy_wasm::types::ContextType;
use weighstation_core::config::{Config, Protocol};

use crate::{clock, kafka_conn, leases, metrics, nats_conn, state, waiters};

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

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let Some(bytes) = self.get_plugin_configuration() else {
            log::error!("weighstation: no plugin configuration");
            return false;
        };
        match Config::parse(&bytes) {
            Ok(config) => {
                log::info!(
                    "weighstation: {} policy version {} in force ({} tenants)",
                    config.protocol.as_str(),
                    config.version,
                    config.tenants.len()
                );
                self.protocol = Some(config.protocol);
                metrics::configuration_installed(&config);
                state::install(config);
                leases::prune();
                metrics::flush();
                waiters::set_driver(self.id);
                true
            }
            Err(e) => {
                log::error!("weighstation: configuration refused: {e}");
                false
            }
        }
    }

    fn on_tick(&mut self) {
        waiters::tick(self.id, clock::now_ns());
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
