//! The few types of Envoy 1.40's dynamic module ABI (source/extensions/dynamic_modules/abi/abi.h)
//! that a network filter's hooks take or return, written from the header: the Rust SDK lives in
//! Envoy's tree only, and this module needs none of it.

use std::ffi::{c_char, c_void, CStr};

/// The ABI version the module was built against (ENVOY_DYNAMIC_MODULES_ABI_VERSION of 1.40),
/// returned by envoy_dynamic_module_on_program_init. Envoy compares it with its own and only
/// warns when they differ; a module built for 1.X is meant to load on 1.X and 1.(X+1).
pub const VERSION: &CStr = c"v0.2.0";

/// envoy_dynamic_module_type_abi_version_module_ptr.
pub type VersionPtr = *const c_char;

/// Envoy's side of a filter configuration or a filter (…_envoy_ptr): opaque to the module.
pub type EnvoyPtr = *mut c_void;

/// The module's side (…_module_ptr): whatever the module returned from config_new or filter_new,
/// handed back on every later hook. Null from either means failure.
pub type ModulePtr = *const c_void;

/// envoy_dynamic_module_type_envoy_buffer: bytes Envoy owns, valid during the hook.
#[repr(C)]
pub struct EnvoyBuffer {
    pub ptr: *const c_char,
    pub length: usize,
}

/// envoy_dynamic_module_type_on_network_filter_data_status (a C enum): what the filter chain
/// does next. StopIteration (1) is left out: a filter that does nothing never stops it.
#[repr(C)]
pub enum DataStatus {
    Continue = 0,
}

/// envoy_dynamic_module_type_network_connection_event, a C enum taken as its integer: the
/// module ignores it, and an integer has no invalid values.
pub type ConnectionEvent = u32;
