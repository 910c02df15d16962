//! VM-wide state. Envoy reuses a worker's VM when only the plugin configuration changes, and
//! calls on_configure on a new root context; connections opened before the change keep their
//! stream contexts. Keeping the active configuration here, rather than in the root context,
//! is what lets those older connections see a new policy on their next read.

use std::cell::RefCell;
use std::rc::Rc;
use weighstation_core::config::{Config, ConfigError, Protocol, Tenants};

thread_local! {
    static CONFIGS: RefCell<[Option<Rc<Config>>; 2]> = const { RefCell::new([None, None]) };
    /// The tenants as last parsed, for the next configuration to take unchanged.
    static TENANTS: RefCell<Tenants> = RefCell::new(Tenants::default());
}

/// Parses a configuration, reusing the tenants of the last one of its protocol in this VM.
pub fn parse(bytes: &[u8]) -> Result<Config, ConfigError> {
    TENANTS.with(|t| Config::parse_reusing(bytes, &mut t.borrow_mut()))
}

/// The configuration `active` with a tenant feed delta applied (see crate::feed).
pub fn apply_delta(active: &Config, delta: &[u8]) -> Result<Config, ConfigError> {
    TENANTS.with(|t| active.with_delta(delta, &mut t.borrow_mut()))
}

/// Makes `config` the one every connection of its protocol in this VM uses from now on.
pub fn install(config: Config) {
    let i = config.protocol.index();
    CONFIGS.with(|c| c.borrow_mut()[i] = Some(Rc::new(config)));
}

/// The active configuration of a protocol, if one was installed.
pub fn active(p: Protocol) -> Option<Rc<Config>> {
    CONFIGS.with(|c| c.borrow()[p.index()].clone())
}
