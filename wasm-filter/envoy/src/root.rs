use proxy_wasm::traits::{Context, RootContext, StreamContext};
use proxy_wasm::types::ContextType;
use weighstation_core::config::{Config, Protocol};

use crate::{kafka_conn::KafkaConn, metrics, nats_conn::NatsConn, state};

/// Envoy's per-connection buffer is the hold limit for a Kafka request the filter must read
/// whole; a larger request is passed through after its header.
const KAFKA_HOLD_LIMIT: usize = 4 << 20;

/// One per listener filter configuration (and per reconfiguration).
#[derive(Default)]
pub struct Root {
    protocol: Option<Protocol>,
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
                true
            }
            Err(e) => {
                log::error!("weighstation: configuration refused: {e}");
                false
            }
        }
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::StreamContext)
    }

    fn create_stream_context(&self, _context_id: u32) -> Option<Box<dyn StreamContext>> {
        match self.protocol? {
            Protocol::Nats => Some(Box::new(NatsConn::default())),
            Protocol::Kafka => Some(Box::new(KafkaConn::new(KAFKA_HOLD_LIMIT))),
        }
    }
}
