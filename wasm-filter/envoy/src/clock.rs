use proxy_wasm::hostcalls;
use std::time::UNIX_EPOCH;

/// Envoy's clock, in ns since the epoch (the GCRA state is absolute time, shared by workers).
pub fn now_ns() -> u64 {
    hostcalls::get_current_time()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
