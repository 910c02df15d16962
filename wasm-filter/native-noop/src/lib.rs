//! An Envoy dynamic module whose network filter (envoy.filters.network.dynamic_modules) does
//! nothing: every connection and every read and write continues at once. `make bench-cpu` runs
//! it ahead of tcp_proxy, on its own listeners, to measure the least a native filter costs a
//! message — Envoy's calls into the module and back — beside the same floor for a Wasm filter
//! (../noop), before deciding whether to move weighstation's filter out of Wasm (issue 45).
//!
//! It exports what Envoy 1.40 requires of a network filter module: the program's init hook and
//! the seven network filter hooks Envoy resolves before it accepts a listener naming the module
//! (config new and destroy, filter new, new connection, read, write, event, destroy). The
//! optional ones (scheduled, HTTP callout done, watermarks) are left out: nothing here asks for
//! them.
//!
//! The workspace's release profile aborts on panic (panic = "abort"): in a module that would
//! take Envoy down, not a VM. Nothing here can panic: no hook allocates, indexes or unwraps.

mod abi;

use abi::{ConnectionEvent, DataStatus, EnvoyBuffer, EnvoyPtr, ModulePtr, VersionPtr};
use std::ffi::c_void;

/// What config_new and filter_new return: any non-null pointer, handed back and never read.
/// One static for every configuration and connection, so the floor has no allocation in it.
static NOTHING: u8 = 0;

fn nothing() -> ModulePtr {
    std::ptr::from_ref(&NOTHING).cast::<c_void>()
}

/// Called once, when Envoy loads the module: the ABI version it was built against.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> VersionPtr {
    abi::VERSION.as_ptr()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_network_filter_config_new(
    _config_envoy: EnvoyPtr,
    _name: EnvoyBuffer,
    _config: EnvoyBuffer,
) -> ModulePtr {
    nothing()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_network_filter_config_destroy(_config: ModulePtr) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_network_filter_new(_config: ModulePtr, _filter_envoy: EnvoyPtr) -> ModulePtr {
    nothing()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_network_filter_new_connection(
    _filter_envoy: EnvoyPtr,
    _filter: ModulePtr,
) -> DataStatus {
    DataStatus::Continue
}

/// Bytes from the client (data_length of them in Envoy's read buffer).
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_network_filter_read(
    _filter_envoy: EnvoyPtr,
    _filter: ModulePtr,
    _data_length: usize,
    _end_stream: bool,
) -> DataStatus {
    DataStatus::Continue
}

/// Bytes toward the client.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_network_filter_write(
    _filter_envoy: EnvoyPtr,
    _filter: ModulePtr,
    _data_length: usize,
    _end_stream: bool,
) -> DataStatus {
    DataStatus::Continue
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_network_filter_event(
    _filter_envoy: EnvoyPtr,
    _filter: ModulePtr,
    _event: ConnectionEvent,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_network_filter_destroy(_filter: ModulePtr) {}
