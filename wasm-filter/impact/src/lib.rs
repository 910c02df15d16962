//! The ABI `weighstation impact` (control-plane/internal/impact) calls: the host copies a JSON
//! [`Trace`] into memory it got from `impact_alloc`, calls `impact_replay`, and reads the JSON
//! outcomes (or `{"error": …}`) at the returned pointer and length, which it gives back with
//! `impact_free`. The replay itself is weighstation_core::impact, the filter's own limiter.

use weighstation_core::impact::{replay, Trace};

/// Memory for `len` bytes of input: a boxed slice of exactly that length.
#[no_mangle]
pub extern "C" fn impact_alloc(len: u32) -> *mut u8 {
    Box::into_raw(vec![0u8; len as usize].into_boxed_slice()).cast::<u8>()
}

/// Gives back memory from `impact_alloc` or an answer.
///
/// # Safety
/// `ptr` and `len` must be what `impact_alloc` or `impact_replay` returned, given back once.
#[no_mangle]
pub unsafe extern "C" fn impact_free(ptr: *mut u8, len: u32) {
    drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len as usize)));
}

/// Replays the trace at `ptr`; returns the answer's pointer (high 32 bits) and length.
///
/// # Safety
/// `ptr` must hold `len` bytes the host wrote into memory from `impact_alloc(len)`; that memory
/// is freed here.
#[no_mangle]
pub unsafe extern "C" fn impact_replay(ptr: *mut u8, len: u32) -> u64 {
    let input = Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len as usize));
    let answer = match serde_json::from_slice::<Trace>(&input) {
        Ok(trace) => serde_json::to_vec(&replay(&trace)),
        Err(e) => serde_json::to_vec(&serde_json::json!({ "error": e.to_string() })),
    }
    .unwrap_or_default();
    let out_len = answer.len();
    let out = Box::into_raw(answer.into_boxed_slice()).cast::<u8>();
    ((out as u64) << 32) | out_len as u64
}
