//! weighstation's Envoy glue: a proxy-wasm network filter. One root context per listener filter
//! (NATS or Kafka) parses the configuration; one stream context per client connection feeds
//! the connection's bytes to the core's scanners and applies their verdicts.

mod kafka_conn;
mod metrics;
mod nats_conn;
mod root;
mod state;
mod tenancy;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(proxy_wasm::types::LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn proxy_wasm::traits::RootContext> { Box::new(root::Root::default()) });
}}
