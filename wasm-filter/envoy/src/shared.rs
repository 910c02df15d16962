//! Limiter state in Envoy shared data: one entry per key, visible to every worker's VM with the
//! same vm_id, updated by compare-and-swap. Keys name the protocol, tenant and limit, so state
//! survives reloads that do not change the limit (rate keys include the limit's fingerprint).

use proxy_wasm::hostcalls;
use proxy_wasm::types::Status;

use crate::metrics;

const CAS_ATTEMPTS: usize = 32;

/// The CAS of a write that may create its key (see [`update`]). Envoy numbers versions from 1 up,
/// skipping 0 when it wraps, so an existing key carries this one only after 2³² − 1 writes and
/// for one write.
const ABSENT_CAS: u32 = u32::MAX;

fn decode<const N: usize>(bytes: Option<Vec<u8>>) -> [u64; N] {
    let mut out = [0u64; N];
    if let Some(b) = bytes {
        for (slot, chunk) in out.iter_mut().zip(b.chunks_exact(8)) {
            let mut a = [0u8; 8];
            a.copy_from_slice(chunk);
            *slot = u64::from_le_bytes(a);
        }
    }
    out
}

fn encode<const N: usize>(v: [u64; N]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Applies `f` to the value at `key` atomically. `f` returns the new value, or None to leave it
/// (a refusal). Returns what `f` saw and whether it was stored. If the host refuses shared data
/// altogether the update fails open: a broken store must not stop traffic.
pub fn update<const N: usize>(key: &str, f: impl Fn([u64; N]) -> Option<[u64; N]>) -> ([u64; N], bool) {
    for _ in 0..CAS_ATTEMPTS {
        let (bytes, cas) = match hostcalls::get_shared_data(key) {
            Ok(v) => v,
            Err(e) => {
                log::warn!("weighstation: shared data {key} unreadable: {e:?}");
                return ([0; N], true);
            }
        };
        let created = bytes.is_none();
        let current = decode::<N>(bytes);
        let Some(next) = f(current) else {
            return (current, false);
        };
        // Envoy checks the CAS only of a key that exists, and a get that found none gives no
        // CAS to pass: a write with none would create the key or overwrite one another worker
        // created meanwhile, losing its change (two workers' first in-flight increments of a
        // tenant became one: 6 requests at a responder against an inFlight of 5). A CAS that no
        // existing key carries makes the write create-if-absent: it creates the key, or fails
        // with a mismatch and is tried again on the value the other worker stored.
        match hostcalls::set_shared_data(key, Some(&encode(next)), cas.or(Some(ABSENT_CAS))) {
            Ok(()) => {
                if created {
                    metrics::shared_data_key_created();
                }
                return (current, true);
            }
            Err(Status::CasMismatch) => continue,
            Err(e) => {
                log::warn!("weighstation: shared data {key} unwritable: {e:?}");
                return (current, true);
            }
        }
    }
    log::warn!("weighstation: shared data {key} contended past {CAS_ATTEMPTS} attempts; admitting");
    ([0; N], true)
}

pub fn read(key: &str) -> u64 {
    decode::<1>(hostcalls::get_shared_data(key).ok().and_then(|(b, _)| b))[0]
}

/// Increments the counter if it is below `max` (None: no bound). True if incremented.
pub fn acquire(key: &str, max: Option<u64>) -> bool {
    update::<1>(key, |[n]| match max {
        Some(m) if n >= m => None,
        _ => Some([n + 1]),
    })
    .1
}

pub fn release(key: &str) {
    give_back(key, 1);
}

/// Decrements the counter by `n`.
pub fn give_back(key: &str, n: u64) {
    if n > 0 {
        update::<1>(key, |[c]| Some([c.saturating_sub(n)]));
    }
}
