//! What the gateway trusts and proves, as host calls: the client certificate Envoy verified,
//! the nkey it signs NATS CONNECTs with as a trusted proxy, and the count of refused
//! credentials.

use proxy_wasm::hostcalls;
use std::cell::OnceCell;
use std::rc::Rc;
use weighstation_core::config::Protocol;
use weighstation_core::identity::PeerCertificate;
use weighstation_core::metrics::auth_failures_metric_name;
use weighstation_core::nats::ProxyKey;

use crate::metrics;

/// The environment variable Envoy passes into the VM (`vm_config.environment_variables`)
/// holding the gateway's nkey seed: from a Kubernetes Secret, never from the policy or xDS.
const PROXY_SEED_ENV: &str = "WEIGHSTATION_NATS_PROXY_SEED";

thread_local! {
    static PROXY_KEY: OnceCell<Option<Rc<ProxyKey>>> = const { OnceCell::new() };
}

fn property(path: &[&str]) -> Option<String> {
    let bytes = hostcalls::get_property(path.to_vec()).ok().flatten()?;
    Some(String::from_utf8_lossy(&bytes).into_owned()).filter(|s| !s.is_empty())
}

/// The client certificate of this connection, if it presented one Envoy verified (a listener
/// with a client CA). Envoy exposes the first URI and the first DNS SAN.
pub fn peer_certificate() -> Option<PeerCertificate> {
    let subject = property(&["connection", "subject_peer_certificate"])?;
    let sans = ["uri_san_peer_certificate", "dns_san_peer_certificate"]
        .iter()
        .filter_map(|p| property(&["connection", p]))
        .collect();
    Some(PeerCertificate { subject, sans })
}

/// The filter chain the control plane gives plaintext clients of a TLS-first NATS listener
/// (the name is shared with control-plane/internal/xds).
const PLAINTEXT_ON_TLS_FIRST_CHAIN: &str = "weighstation-plaintext-on-tls-first";

/// Whether Envoy terminated TLS for this connection (it did when it reports a TLS version).
pub fn client_tls() -> bool {
    property(&["connection", "tls_version"]).is_some()
}

/// The name of the filter chain that serves this connection: which gateway listener the client
/// reached (the control plane names each NATS chain).
pub fn filter_chain() -> Option<String> {
    property(&["xds", "filter_chain_name"])
}

/// Whether a connection served by `chain` is a plaintext one on a listener that wants the TLS
/// handshake first.
pub fn plaintext_on_tls_first_listener(chain: Option<&str>) -> bool {
    chain == Some(PLAINTEXT_ON_TLS_FIRST_CHAIN)
}

/// The client's IP address as Envoy sees it (without the port).
pub fn client_ip() -> Option<String> {
    let address = property(&["source", "address"])?;
    let ip = address.rsplit_once(':').map_or(address.as_str(), |(ip, _)| ip);
    Some(ip.trim_start_matches('[').trim_end_matches(']').to_owned())
}

/// The gateway's proxy key, read once per VM; None when the gateway is not a trusted proxy.
pub fn proxy_key() -> Option<Rc<ProxyKey>> {
    PROXY_KEY.with(|k| {
        k.get_or_init(|| {
            let seed = std::env::var(PROXY_SEED_ENV).ok().filter(|s| !s.trim().is_empty())?;
            match ProxyKey::from_seed(&seed) {
                Ok(key) => {
                    log::info!(
                        "weighstation: signing NATS CONNECTs as trusted proxy {}",
                        key.public_key()
                    );
                    Some(Rc::new(key))
                }
                Err(why) => {
                    log::error!("weighstation: {PROXY_SEED_ENV} is not a usable nkey seed: {why}");
                    None
                }
            }
        })
        .clone()
    })
}

/// The broker refused a connection's credentials.
pub fn authentication_failed(protocol: Protocol) {
    metrics::count(&auth_failures_metric_name(protocol), 1);
}
