//! weighstation's Envoy glue: a proxy-wasm network filter. One root context per listener filter
//! (NATS or Kafka) parses the configuration; one stream context per client connection feeds
//! the connection's bytes to the core and applies its verdicts with limiter state kept in
//! Envoy shared data.

mod backlog;
mod buffer;
mod clients;
mod clock;
mod connection;
mod consume;
mod discovery;
mod feed;
mod gatekeeper;
mod host;
mod kafka_conn;
mod keys;
mod leases;
mod metrics;
mod nats_conn;
mod paused;
mod quota;
mod reports;
mod root;
mod shared;
mod state;
mod tenancy;
mod trust;
mod vm_token;
mod waiters;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(proxy_wasm::types::LogLevel::Info);
    proxy_wasm::set_root_context(|id| -> Box<dyn proxy_wasm::traits::RootContext> { Box::new(root::Root::new(id)) });
}}
